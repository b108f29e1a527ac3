#!/usr/bin/python3
"""Generate synthetic JSON Lines records for contracts/bench-mixed.yaml.

Usage: gen-mixed.py [--records N] [--seed S] [-o FILE]

App sessions, the third bench contract (bench/table.sh): every string
format kiln checks (uuid, email, date-time, date, time, ipv4, ipv6, uri,
hostname, byte), patterns, enums, numeric ranges with multipleOf, integer
formats, two pseudonymised fields (the account id and the email) and
nested arrays of objects (events, each with an array of tags, and
devices), about 900 bytes on average. Every record is valid under the
contract. Output is deterministic for a given seed and record count.
Standard library only; writes UTF-8 to FILE or stdout.
"""

import base64
import importlib.util
import os


PLATFORMS = ["web"] * 5 + ["ios"] * 3 + ["android"] * 3 + ["desktop"]
KINDS = ["view"] * 8 + ["click"] * 5 + ["scroll"] * 3 + ["search", "purchase", "error"]
OSES = ["ios", "android", "windows", "macos", "linux"]
OFFSETS = ["Z"] * 6 + ["+01:00", "+02:00", "-05:00", "+09:00", "+05:30"]
TAGS = ["new", "returning", "promo", "beta", "dark-mode", "a11y", "slow-net", "ab-test-7"]
PATHS = ["/", "/search", "/cart", "/checkout", "/account", "/help", "/p/%05d", "/c/%03d"]
FIRST = ["anna", "ben", "carla", "david", "elena", "felix", "grace", "hiro",
         "ines", "jonas", "kofi", "lena", "marco", "nadia", "oscar", "priya"]
LAST = ["smith", "mueller", "garcia", "rossi", "kowalski", "tanaka", "nguyen", "okafor"]
DOMAINS = ["example.com", "example.org", "mail.example.com", "corp.example.co.uk"]
HOSTS = ["edge-%02d.eu-west.example.net", "edge-%02d.us-east.example.net", "api-%02d.example.com"]


def uuid4(bits):
    u = bits(128)
    u = (u & ~(0xF << 76) | (0x4 << 76)) & ~(0x3 << 62) | (0x2 << 62)
    h = "%032x" % u
    return '"%s-%s-%s-%s-%s"' % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def money(cents):
    return "%d.%02d" % (cents // 100, cents % 100)


def build_pools(rng):
    days = []
    mdays = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    for y in (2025, 2026):
        for m in range(1, 13):
            for d in range(1, mdays[m - 1] + 1):
                days.append("%04d-%02d-%02d" % (y, m, d))
    emails = []
    for _ in range(20000):
        f, l = rng.choice(FIRST), rng.choice(LAST)
        local = "%s.%s%d" % (f, l, rng.randrange(1, 1000)) if rng.random() < 0.7 else "%s%s" % (f[0], l)
        emails.append('"%s@%s"' % (local, rng.choice(DOMAINS)))
    ipv4 = ['"%d.%d.%d.%d"' % (rng.randrange(1, 224), rng.randrange(256), rng.randrange(256),
                               rng.randrange(1, 255)) for _ in range(4000)]
    ipv6 = ['"2001:db8:%x:%x::%x"' % (rng.randrange(65536), rng.randrange(65536), rng.randrange(1, 65536))
            for _ in range(4000)]
    hosts = ['"%s"' % (rng.choice(HOSTS) % rng.randrange(100)) for _ in range(300)]
    return {"days": days, "emails": emails, "ipv4": ipv4, "ipv6": ipv6, "hosts": hosts}


def clock(bits):
    t = bits(27) % 86400000
    return "%02d:%02d:%02d.%03d" % (t // 3600000, t // 60000 % 60, t // 1000 % 60, t % 1000)


def stamp(bits, day):
    return '"%sT%s%s"' % (day, clock(bits), OFFSETS[bits(8) % len(OFFSETS)])


def make_record(rng, P):
    bits = rng.getrandbits
    rnd = rng.random
    day = P["days"][bits(10) % len(P["days"])]
    platform = PLATFORMS[bits(4) % len(PLATFORMS)]
    parts = ['"session_id":' + uuid4(bits),
             '"account_id":"A%09d"' % (bits(30) % 1000000000),
             '"email":' + P["emails"][bits(15) % len(P["emails"])],
             '"started_at":' + stamp(bits, day),
             '"day":"%s"' % day,
             '"local_time":"%s"' % clock(bits),
             '"platform":"%s"' % platform,
             '"app_version":"%d.%d.%d"' % (1 + bits(2), bits(4), bits(6)),
             '"client_ip":' + P["ipv4"][bits(12) % len(P["ipv4"])]]
    if rnd() < 0.3:
        parts.append('"client_ipv6":' + P["ipv6"][bits(12) % len(P["ipv6"])])
    parts.append('"edge_host":' + P["hosts"][bits(9) % len(P["hosts"])])
    if rnd() < 0.6:
        parts.append('"referrer":"https://www.example.com/r/%d?utm_source=news&id=%x"' % (bits(16), bits(32)))
    parts.append('"nonce":"%s"' % base64.b64encode(bits(96).to_bytes(12, "big")).decode())
    parts.append('"duration_ms":%d' % (bits(22) % 3600000))
    parts.append('"spend":%s' % money(bits(16) if rnd() < 0.2 else 0))
    events = []
    for _ in range(1 + bits(3) % 6):
        kind = KINDS[bits(5) % len(KINDS)]
        path = PATHS[bits(3) % len(PATHS)]
        if "%" in path:
            path %= bits(16) % (100000 if "p/" in path else 1000)
        ev = '{"event_id":%s,"at":%s,"kind":"%s","path":"%s"' % (uuid4(bits), stamp(bits, day), kind, path)
        if rnd() < 0.5:
            ev += ',"value":%s' % money(bits(14))
        if rnd() < 0.4:
            ev += ',"tags":[%s]' % ",".join('"%s"' % TAGS[bits(3)] for _ in range(1 + bits(1)))
        events.append(ev + "}")
    parts.append('"events":[' + ",".join(events) + "]")
    devices = []
    for _ in range(1 + (rnd() < 0.25)):
        devices.append('{"device_id":%s,"os":"%s","screen":{"w":%d,"h":%d},"first_seen":"%s"}' % (
            uuid4(bits), OSES[bits(3) % len(OSES)], 320 + bits(11) % 3521, 480 + bits(11) % 1681,
            P["days"][bits(9) % len(P["days"])]))
    parts.append('"devices":[' + ",".join(devices) + "]")
    if rnd() < 0.1:
        parts.append('"crashed":true')
    return "{" + ",".join(parts) + "}"


if __name__ == "__main__":
    # the command line is gen-orders.py's (one file name with a dash: loaded by path)
    spec = importlib.util.spec_from_file_location(
        "gen_orders", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen-orders.py"))
    gen_orders = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_orders)
    gen_orders.generate(__doc__, build_pools, make_record)
