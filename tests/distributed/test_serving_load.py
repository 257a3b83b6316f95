"""The load generator as the lab runs it: a real server, the openai client."""

import socket

import pytest

from clusterlab.serving import load
from clusterlab.serving.sim import Workload

pytestmark = pytest.mark.dist


def test_every_request_is_answered_in_order_of_its_arrival_and_nothing_stays():
    with load.serve() as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        df = load.open_loop(url, Workload(n=12, rate_per_s=50.0, new_tokens=6))
        steps = load.server_steps(url)
    assert (
        len(df) == 12 and (df.ttft_s > 0).all() and (df.done_s > df.first_token_s).all()
    )
    # six tokens each, one step per token: the server timed at least that many
    assert steps.batch.min() >= 1 and len(steps) >= 6
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), 1):
        pass


def test_the_client_table_has_both_sources_at_every_rate():
    table = load.client_table(rates=(20.0, 400.0), n=12)
    assert sorted(table.source.unique()) == ["client", "twin"]
    assert table.groupby("rate_per_s").size().eq(2).all()


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="max_batch_requests"):
        with load.serve(max_batch_requests=0):
            pass
