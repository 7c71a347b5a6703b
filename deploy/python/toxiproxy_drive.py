"""Drives a running `anyplay-chaos up --api HOST:PORT` with PyPI's toxiproxy-python, unchanged:
the toxic types the Node client's script leaves (slicer, slow_close, limit_data), a proxy taken
down for a while, Toxiproxy's errors, and a reset. Exit 0: every step as Toxiproxy answers.
Usage: toxiproxy_drive.py HOST PORT"""
import sys
import time

from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

APIConsumer.host, APIConsumer.port = sys.argv[1], int(sys.argv[2])
server = Toxiproxy()


def step(what):
    print("ok", what, flush=True)


assert server.running()
assert b"version" in server.version()
proxies = server.proxies()
assert {"node-1-players", "node-2-players", "node-1-postgres", "node-1-nats"} <= set(proxies)
step("proxies " + " ".join(sorted(proxies)))

try:
    server.create(upstream=proxies["node-1-nats"].upstream, name="node-1-nats")
    raise AssertionError("created a proxy that exists")
except ProxyExists:
    pass
players1 = server.get_proxy("node-1-players")
try:
    players1.add_toxic(type="slicer", stream="sideways")
    raise AssertionError("took a stream that is none")
except InvalidToxic:
    pass
try:
    players1.destroy_toxic("none_here")
    raise AssertionError("removed a toxic that is none")
except NotFound:
    pass
step("errors")

players1.add_toxic(type="slicer", attributes={"average_size": 8, "size_variation": 2, "delay": 1000})
postgres1 = server.get_proxy("node-1-postgres")
postgres1.add_toxic(type="slow_close", stream="upstream", attributes={"delay": 500})
players2 = server.get_proxy("node-2-players")
players2.add_toxic(name="cut_short", type="limit_data", toxicity=0.5, attributes={"bytes": 20000})
toxics = players2.toxics()
assert toxics["cut_short"].attributes == {"bytes": 20000}, toxics["cut_short"].attributes
assert toxics["cut_short"].toxicity == 0.5
assert set(players1.toxics()) == {"slicer_downstream"}
step("slicer, slow_close, limit_data")
time.sleep(3)
assert players1.destroy_toxic("slicer_downstream")
assert postgres1.destroy_toxic("slow_close_upstream")
assert players2.destroy_toxic("cut_short")
assert players2.toxics() == {}
step("removed")

nats1 = server.get_proxy("node-1-nats")
with nats1.down():
    assert server.get_proxy("node-1-nats").enabled is False
    time.sleep(2)
assert server.get_proxy("node-1-nats").enabled is True
step("down and up")

assert server.reset()
step("reset")
print("done")
