/* The text alternative of every chart of the book: its data, as tables, in a
   <details> below the chart (a "data" toggle that the keyboard reaches like any
   link). Called by each chart's script once Vega has drawn it
   (clusterlab.core.theme.book_html). */
window.clusterlabChartData = function (el, spec, title) {
  var MAX_ROWS = 200;
  var sets = [];
  var named = spec.datasets || {};
  Object.keys(named).forEach(function (k) { sets.push(named[k]); });
  if (spec.data && Array.isArray(spec.data.values)) sets.push(spec.data.values);
  sets = sets.filter(function (rows) {
    return Array.isArray(rows) && rows.length && typeof rows[0] === "object";
  });
  if (!sets.length) return;
  var box = document.createElement("details");
  box.className = "clusterlab-chart-data";
  var summary = document.createElement("summary");
  summary.textContent = "Data of the chart: " + title;
  box.appendChild(summary);
  sets.forEach(function (rows, n) {
    var cols = [];
    rows.forEach(function (r) {
      Object.keys(r).forEach(function (c) { if (cols.indexOf(c) < 0) cols.push(c); });
    });
    var table = document.createElement("table");
    table.className = "table";
    var caption = document.createElement("caption");
    caption.textContent = (sets.length > 1 ? "Table " + (n + 1) + ": " : "") +
      rows.length + " rows" + (rows.length > MAX_ROWS ? ", the first " + MAX_ROWS + " shown" : "");
    table.appendChild(caption);
    var head = table.createTHead().insertRow();
    cols.forEach(function (c) {
      var th = document.createElement("th");
      th.scope = "col";
      th.textContent = c;
      head.appendChild(th);
    });
    var body = table.createTBody();
    rows.slice(0, MAX_ROWS).forEach(function (r) {
      var tr = body.insertRow();
      cols.forEach(function (c) {
        var v = r[c];
        tr.insertCell().textContent = v === undefined || v === null ? "" :
          typeof v === "number" ? String(Number(v.toPrecision(6))) : String(v);
      });
    });
    box.appendChild(table);
  });
  el.parentNode.insertBefore(box, el.nextSibling);
};
