#!/usr/bin/python3
"""Generate synthetic JSON Lines records for contracts/user-events.yaml.

Usage: gen-user-events.py [--records N] [--seed S] [--invalid-rate R]
                          [--max-record-bytes N] [--expect FILE] [--append]
                          [-o FILE]

Records are valid under the contract unless --invalid-rate R (0..1) is given;
then about that fraction of records is broken in exactly one way (see
INVALID_KINDS).  Output is deterministic for a given seed and arguments.
Standard library only; writes UTF-8 to FILE or stdout (the invalid_utf8 kind
writes one byte that is not UTF-8).

--max-record-bytes N: the source.max_record_bytes of the pipeline that will
read the records; adds the too_large kind (a record of N + 1000 bytes).
Without it no record is too large.

--expect FILE: the ground truth for end-to-end checkers, one JSON line per
record in the order written:
  {"line":N,"event_id":"...","outcome":"valid","pii":[...]}
  {"line":N,"event_id":...,"outcome":"quarantined","code":"type","path":"session_ms","pii":[...]}
"line" counts from 0 within this invocation; "event_id" is the record's
event_id when it has one as a string (else null); "code" and "path" are the
first violation kiln must report (docs/CONTRACTS.md); "pii" lists the
personal values written into the record (user id, email, client IP, and the
emails, phones and IPs put into free text), raw and as kiln normalises them.
--append appends to -o FILE and --expect FILE instead of replacing them.
"""

import argparse
import json
import random
import sys

CHUNK = 8192  # records per write


def js(s):
    """JSON string literal, compact, UTF-8 kept as is."""
    return json.dumps(s, ensure_ascii=False)


# --------------------------------------------------------------------------
# Static vocabularies

EVENT_TYPES = ["page_view", "click", "search", "signup", "purchase", "logout"]
# weights roughly like a real clickstream
EVENT_WEIGHTS = [45, 25, 14, 3, 6, 7]

FIRST = ["anna", "ben", "carla", "david", "elena", "felix", "grace", "hiro",
         "ines", "jonas", "kofi", "lena", "marco", "nadia", "oscar", "priya",
         "quinn", "rosa", "sam", "tara", "umar", "vera", "wei", "xenia",
         "yusuf", "zoe", "liam", "olivia", "noah", "emma", "lucas", "mia",
         "sofia", "mateo", "aiko", "lars", "fatima", "diego", "chloe", "ivan"]
LAST = ["smith", "mueller", "garcia", "rossi", "kowalski", "tanaka", "nguyen",
        "johnson", "schmidt", "dubois", "silva", "ivanova", "okafor", "brown",
        "jensen", "novak", "haddad", "kim", "lopez", "martin", "fischer",
        "wilson", "moreau", "sato", "patel", "larsen", "costa", "weber",
        "murphy", "andersen"]
DOMAINS = ["example.com", "example.org", "example.net", "mail.example.com",
           "gmail.example", "outlook.example", "corp.example.co.uk",
           "posteo.example.de", "icloud.example"]

COUNTRIES = ["US", "US", "US", "GB", "GB", "DE", "DE", "FR", "ES", "IT", "NL",
             "SE", "PL", "JP", "IN", "BR", "CA", "AU", "MX", "CH", "AT", "IE",
             "KR", "SG", "ZA", "NG", "NO", "DK", "PT", "CZ"]

OFFSETS = ["Z"] * 12 + ["+00:00", "+01:00", "+02:00", "+02:00", "-05:00",
                        "-08:00", "+05:30", "+09:00", "-03:00", "+10:00"]

TAGS = ["mobile", "web", "beta", "promo", "newsletter", "returning",
        "first-visit", "ab-test-42", "ab-test-43", "holiday-sale", "organic",
        "paid", "referral", "vip", "trial", "dark-mode", "checkout-v2",
        "push", "email-campaign", "ios-widget", "gift", "loyalty"]

DEVICES = {
    "android": (["10", "11", "12", "13", "14", "14.1", "15"],
                ["Pixel 8", "Pixel 7a", "Galaxy S23", "Galaxy A54",
                 "Redmi Note 12", "OnePlus 11", "Moto G84"]),
    "ios": (["16.7.2", "17.0", "17.4.1", "17.5", "18.0", "18.1.1", "14.2"],
            ["iPhone 15", "iPhone 14 Pro", "iPhone 13 mini", "iPhone SE",
             "iPad Air", "iPad Pro 11"]),
    "linux": (["6.1", "6.5.0", "6.8", "5.15.0"],
              ["ThinkPad X1 Carbon", "Framework 13", "Dell XPS 13",
               "Desktop"]),
    "macos": (["13.6", "14.2", "14.4.1", "15.0", "15.1"],
              ["MacBook Air M2", "MacBook Pro 14", "iMac 24", "Mac mini"]),
    "windows": (["10.0.19045", "10.0.22631", "11", "10"],
                ["Surface Laptop 5", "HP EliteBook 840", "Lenovo Yoga 7",
                 "Desktop", "ASUS ROG Zephyrus"]),
    "other": (["1.0", "2.3", "7"],
              ["Smart TV", "Kiosk", "Chromebook", "Game console"]),
}
DEVICE_OS_WEIGHTS = {"android": 35, "ios": 30, "windows": 18, "macos": 10,
                     "linux": 4, "other": 3}

PAGES = ["", "products", "products/headphones", "products/laptops",
         "products/phones/android", "cart", "checkout", "checkout/payment",
         "account", "account/settings", "account/orders", "help",
         "help/shipping", "help/returns", "blog/spring-collection-2026",
         "search", "deals", "signup", "login", "wishlist"]
HOSTS = ["https://www.example.com/", "https://shop.example.com/",
         "https://m.example.com/", "https://www.example.co.uk/",
         "https://de.example.com/"]

SEARCHES = ["wireless headphones", "running shoes size 42", "usb-c charger",
            "gift for dad", "4k monitor under 300", "linen shirt",
            "coffee grinder", "yoga mat", "kids backpack", "espresso machine",
            "winter jacket women", "mechanical keyboard", "phone case pixel 8",
            "standing desk", "laptop sleeve 14 inch", "Laufschuhe Damen",
            "Geschenk für Oma", "café crème", "ワイヤレスイヤホン", "日本茶",
            "bluetooth speaker waterproof", "protein powder vanilla"]
PHONES = ["+44 20 7946 0958", "+44 161 496 0734", "+1 (555) 013-2264",
          "+1 555 010 4477", "+49 30 901820", "+49 89 1234 5678",
          "+33 1 99 00 12 34", "020 7946 0321", "(212) 555-0199",
          "+81 3-1234-5678", "+61 2 5550 1234"]
FEEDBACK = [
    "Can't log in since the update, please reset my password. You can reach me at {email}",
    "Please call me back on {phone} about my refund",
    "My order {order} hasn't arrived yet, it's been two weeks",
    "Checkout keeps failing with error 502 from my office network {ip}",
    "Love the new dark mode! Would be great to have it on tablet too.",
    "Vielen Dank für die schnelle Lieferung! Grüße aus München",
    "日本への配送は可能ですか？ Do you ship to Japan?",
    "The size chart is wrong for the linen shirts, the M is more like an S",
    "Wrong item delivered (order {order}). Email me at {email} or call {phone}",
    "app crashes when I open the cart on my phone",
    "Why was I charged twice? Reference {order}",
    "I moved, please update my address. New number is {phone}",
    "Our firewall blocks your CDN, requests from {ip} time out",
    "Great service, thanks!",
    "Merci beaucoup, très bon produit 👍",
    "Coupon SPRING25 doesn't work",
    "Please delete my account and all data ({email})",
    "Müller here – the invoice shows the wrong VAT number",
    "how do I change my password",
    "Item arrived damaged, photos sent to support from {email}",
]


def build_pools(rng):
    """Precompute escaped JSON fragments; everything drawn from rng."""
    ev_types = []
    for t, w in zip(EVENT_TYPES, EVENT_WEIGHTS):
        ev_types += [t] * w

    days = []
    # 2025-01-01 .. 2026-03-31 (real calendar days)
    mdays = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    for y in (2025, 2026):
        for m in range(1, 13):
            if y == 2026 and m > 3:
                break
            for d in range(1, mdays[m - 1] + 1):
                days.append("%04d-%02d-%02d" % (y, m, d))

    def email():
        f = rng.choice(FIRST)
        l = rng.choice(LAST)
        r = rng.random()
        if r < 0.5:
            local = "%s.%s%d" % (f, l, rng.randrange(1, 100))
        elif r < 0.75:
            local = "%s.%s" % (f, l)
        elif r < 0.9:
            local = "%s%s" % (f[0], l)
        else:
            local = "%s_%s%d" % (f, l, rng.randrange(1970, 2006))
        return local + "@" + rng.choice(DOMAINS)

    def ip():
        r = rng.random()
        if r < 0.3:
            return "192.168.%d.%d" % (rng.randrange(256), rng.randrange(1, 255))
        if r < 0.45:
            return "10.%d.%d.%d" % (rng.randrange(256), rng.randrange(256),
                                    rng.randrange(1, 255))
        return "%d.%d.%d.%d" % (rng.randrange(1, 224), rng.randrange(256),
                                rng.randrange(256), rng.randrange(1, 255))

    emails = [js(email()) for _ in range(20000)]

    messages = []
    message_pii = {}
    for _ in range(6000):
        r = rng.random()
        found = []
        if r < 0.45:
            s = rng.choice(SEARCHES)
        else:
            s = rng.choice(FEEDBACK)
            e, ph, i = email(), rng.choice(PHONES), ip()
            for mark, v in (("{email}", e), ("{phone}", ph), ("{ip}", i)):
                if mark in s:
                    found.append(v)
            s = s.replace("{email}", e)
            s = s.replace("{phone}", ph)
            s = s.replace("{ip}", i)
            s = s.replace("{order}", "#%d-%04d" % (rng.randrange(100, 999),
                                                  rng.randrange(10000)))
        messages.append(js(s))
        message_pii[js(s)] = found

    urls = []
    for _ in range(4000):
        u = rng.choice(HOSTS) + rng.choice(PAGES)
        r = rng.random()
        if r < 0.25:
            q = rng.choice(SEARCHES[:15]).replace(" ", "+")
            u += "?q=" + q
        elif r < 0.4:
            u += "?utm_source=newsletter&utm_medium=email&utm_campaign=spring26"
        elif r < 0.5:
            u += "?ref=%s" % rng.choice(["home", "banner", "push", "footer"])
        urls.append(js(u))

    devices = []
    for os_name, w in DEVICE_OS_WEIGHTS.items():
        vers, models = DEVICES[os_name]
        for _ in range(w * 4):
            parts = ['"os":' + js(os_name)]
            if rng.random() < 0.9:
                parts.append('"os_version":' + js(rng.choice(vers)))
            if rng.random() < 0.8:
                parts.append('"model":' + js(rng.choice(models)))
            devices.append("{" + ",".join(parts) + "}")

    tag_lists = []
    for _ in range(3000):
        n = rng.choice([0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 5])
        tag_lists.append("[" + ",".join(js(t) for t in rng.sample(TAGS, n)) + "]")

    ips = [js(ip()) for _ in range(20000)]

    return {
        "ev_types": [js(t) for t in ev_types],
        "days": days,
        "emails": emails,
        "messages": messages,
        "message_pii": message_pii,
        "urls": urls,
        "devices": devices,
        "tag_lists": tag_lists,
        "ips": ips,
        "countries": [js(c) for c in COUNTRIES],
        "offsets": OFFSETS,
    }


# --------------------------------------------------------------------------
# One record as a list of (key, raw JSON value) pairs

def make_pairs(rng, P):
    rnd = rng.random
    bits = rng.getrandbits
    ev = P["ev_types"][bits(16) % len(P["ev_types"])]

    # uuid4: version nibble 4, variant 10xx
    u = bits(128)
    u = (u & ~(0xF << 76) | (0x4 << 76)) & ~(0x3 << 62) | (0x2 << 62)
    h = "%032x" % u
    eid = '"%s-%s-%s-%s-%s"' % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])

    days = P["days"]
    di = bits(20) % len(days)
    day = days[di]
    t = bits(27) % 86400000
    off = P["offsets"][bits(5) % len(P["offsets"])]
    occ = '"%sT%02d:%02d:%02d.%03d%s"' % (day, t // 3600000, t // 60000 % 60,
                                          t // 1000 % 60, t % 1000, off)

    pairs = [("event_id", eid), ("event_type", ev), ("occurred_at", occ)]
    r = rnd()
    if r < 0.85:
        rd = days[di + 1] if (r < 0.05 and di + 1 < len(days)) else day
        pairs.append(("received_date", '"' + rd + '"'))
    pairs.append(("user_id", '"u-%06d"' % (bits(20) % 1000000)))
    if rnd() < 0.7:
        pairs.append(("email", P["emails"][bits(16) % len(P["emails"])]))
    if rnd() < 0.8:
        pairs.append(("client_ip", P["ips"][bits(16) % len(P["ips"])]))
    if rnd() < 0.85:
        pairs.append(("session_ms", str(bits(24) % 3600000)))
    if ev == '"purchase"':
        c = bits(16)
        if c < 3000:
            pairs.append(("amount", "0"))
        else:
            pairs.append(("amount", "%d.%02d" % (c % 500, (c >> 3) % 100)
                          if c & 3 else "%d.99" % (c % 300)))
    elif rnd() < 0.08:
        pairs.append(("amount", "0"))
    pairs.append(("consent", "true" if rnd() < 0.8 else "false"))
    if rnd() < 0.9:
        pairs.append(("country", P["countries"][bits(8) % len(P["countries"])]))
    if ev == '"search"' or rnd() < 0.3:
        pairs.append(("message", P["messages"][bits(16) % len(P["messages"])]))
    if rnd() < 0.85:
        pairs.append(("page_url", P["urls"][bits(16) % len(P["urls"])]))
    pairs.append(("device", P["devices"][bits(16) % len(P["devices"])]))
    if rnd() < 0.75:
        pairs.append(("tags", P["tag_lists"][bits(16) % len(P["tag_lists"])]))
    return pairs


def render(pairs):
    return "{" + ",".join(['"%s":%s' % kv for kv in pairs]) + "}"


def setp(pairs, key, value):
    """Replace key's value, or insert it (keeps order otherwise)."""
    for i, (k, _) in enumerate(pairs):
        if k == key:
            pairs[i] = (key, value)
            return
    pairs.insert(len(pairs) - 1, (key, value))


# --------------------------------------------------------------------------
# Invalid variants: each breaks exactly one rule of the contract and returns
# (text, code, path): the record and the first violation kiln must report
# for it (docs/CONTRACTS.md).

def inv_missing_required(rng, pairs):
    key = rng.choice(["event_id", "event_type", "occurred_at", "user_id",
                      "consent", "device", "device.os"])
    if key == "device.os":
        setp(pairs, "device", '{"os_version":"14.2","model":"Pixel 8"}')
        return render(pairs), "missing_required", key
    return render([kv for kv in pairs if kv[0] != key]), "missing_required", key


def inv_type(rng, pairs):
    key, val = rng.choice([("consent", '"yes"'), ("session_ms", '"1234"'),
                           ("session_ms", "12.5"), ("user_id", "123456"),
                           ("amount", '"19.99"'), ("tags", '"promo,beta"'),
                           ("device", '"android"'),
                           ("event_type", '["click"]')])
    setp(pairs, key, val)
    return render(pairs), "type", key


def inv_enum(rng, pairs):
    if rng.random() < 0.5:
        setp(pairs, "event_type", rng.choice(['"pageview"', '"Click"',
                                              '"add_to_cart"']))
        return render(pairs), "enum", "event_type"
    setp(pairs, "device", '{"os":"chromeos","os_version":"120"}')
    return render(pairs), "enum", "device.os"


def inv_pattern(rng, pairs):
    if rng.random() < 0.7:
        setp(pairs, "country", rng.choice(['"usa"', '"de"', '"U1"']))
        return render(pairs), "pattern", "country"
    setp(pairs, "device", '{"os":"ios","os_version":"17.x"}')
    return render(pairs), "pattern", "device.os_version"


def inv_range(rng, pairs):
    key, val = rng.choice([("session_ms", "-5"), ("session_ms", "86400001"),
                           ("amount", "-1.50"), ("amount", "1000000"),
                           ("received_date", '"2101-01-01"'),
                           ("occurred_at", '"2014-12-31T23:59:59Z"')])
    setp(pairs, key, val)
    return render(pairs), "range", key


def inv_length(rng, pairs):
    r = rng.random()
    if r < 0.5:
        setp(pairs, "tags", "[" + ",".join(['"t%d"' % i for i in range(17)]) + "]")
        path = "tags"
    elif r < 0.7:
        setp(pairs, "user_id", '""')
        path = "user_id"
    elif r < 0.85:
        setp(pairs, "tags", '["promo","' + "x" * 33 + '"]')
        path = "tags[1]"
    else:
        setp(pairs, "message", js("spam " * 401))
        path = "message"
    return render(pairs), "length", path


def inv_format(rng, pairs):
    key, val = rng.choice([("email", '"not-an-email"'),
                           ("client_ip", '"999.12.0.1"'),
                           ("event_id", '"not-a-uuid"'),
                           ("occurred_at", '"2026-03-14T09:26:53"'),
                           ("received_date", '"2026-02-30"'),
                           ("page_url", '"www.example.com/cart"')])
    setp(pairs, key, val)
    return render(pairs), "format", key


def inv_unknown_field(rng, pairs):
    key = rng.choice(["debug", "userAgent", "experiment"])
    pairs.insert(rng.randrange(len(pairs) + 1), (key, '"x"'))
    return render(pairs), "unknown_field", key


def inv_not_object(rng, pairs):
    return "[" + ",".join(v for _, v in pairs[:4]) + "]", "not_object", "$"


def inv_json_syntax(rng, pairs):
    s = render(pairs)
    return s[: rng.randrange(1, len(s) - 1)], "json_syntax", "$"


def inv_duplicate_key(rng, pairs):
    s = render(pairs)
    # hand-written raw text: a second "user_id" member before the closing brace
    return s[:-1] + ',"user_id":"u-000001"}', "duplicate_key", "user_id"


def inv_too_deep(rng, pairs):
    n = 129 + rng.randrange(100)  # past the default source.max_depth (128)
    setp(pairs, "tags", "[" * n + "]" * n)
    return render(pairs), "too_deep", "$"


def inv_invalid_utf8(rng, pairs):
    # a lone continuation byte (written as a surrogate escape, see write_lines)
    bad = rng.choice(["\udc80", "\udcff", "\udcc3"])
    setp(pairs, "message", '"caf' + bad + ' cr' + bad + 'me"')
    return render(pairs), "invalid_utf8", "$"


def inv_too_large(rng, pairs, max_bytes):
    pad = "spam " * ((max_bytes + 1000) // 5 + 1)
    setp(pairs, "message", js(pad))
    return render(pairs), "too_large", "$"


INVALID_KINDS = [inv_missing_required, inv_type, inv_enum, inv_pattern,
                 inv_range, inv_length, inv_format, inv_unknown_field,
                 inv_not_object, inv_json_syntax, inv_duplicate_key,
                 inv_too_deep, inv_invalid_utf8]


# --------------------------------------------------------------------------
# Ground truth

PII_KEYS = ("user_id", "email", "client_ip")


def pii_of(pairs, P):
    """Personal values of a record's pairs, raw and as kiln normalises them."""
    out = []
    for k, v in pairs:
        if k in PII_KEYS:
            try:
                x = json.loads(v)
            except ValueError:
                continue
            if isinstance(x, str):
                out.append(x)
                if k == "email":
                    out.append(x.strip().lower())
        elif k == "message":
            for x in P["message_pii"].get(v, ()):
                out.append(x)
                if "@" in x:
                    out.append(x.lower())
                elif x.startswith("+") and " " in x:
                    out.append("+" + "".join(c for c in x if c.isdigit()))
    return sorted(set(out))


def event_id_of(pairs):
    for k, v in pairs:
        if k == "event_id":
            try:
                x = json.loads(v)
            except ValueError:
                return None
            return x if isinstance(x, str) else None
    return None


# --------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Generate JSON Lines records for contracts/user-events.yaml")
    ap.add_argument("--records", type=int, default=1000, metavar="N")
    ap.add_argument("--seed", type=int, default=1, metavar="S")
    ap.add_argument("--invalid-rate", type=float, default=0.0, metavar="R")
    ap.add_argument("--max-record-bytes", type=int, default=0, metavar="N")
    ap.add_argument("--expect", metavar="FILE")
    ap.add_argument("--append", action="store_true")
    ap.add_argument("-o", "--output", metavar="FILE")
    a = ap.parse_args(argv)
    if a.records < 0:
        ap.error("--records must be >= 0")
    if not 0.0 <= a.invalid_rate <= 1.0:
        ap.error("--invalid-rate must be in [0, 1]")
    if a.max_record_bytes < 0:
        ap.error("--max-record-bytes must be >= 0")

    rng = random.Random(a.seed)
    P = build_pools(rng)
    rate = a.invalid_rate
    kinds = list(INVALID_KINDS)
    if a.max_record_bytes:
        kinds.append(lambda rng, pairs: inv_too_large(rng, pairs, a.max_record_bytes))

    mode = "ab" if a.append else "wb"
    if a.output and a.output != "-":
        out = open(a.output, mode)
    else:
        out = open(sys.stdout.fileno(), "wb", closefd=False)
    expect = open(a.expect, mode) if a.expect else None
    try:
        n = a.records
        done = 0
        while done < n:
            m = min(CHUNK, n - done)
            lines = []
            facts = []
            for _ in range(m):
                pairs = make_pairs(rng, P)
                if rate > 0 and rng.random() < rate:
                    pii = pii_of(pairs, P)
                    text, code, path = rng.choice(kinds)(rng, pairs)
                    if code == "duplicate_key":
                        pii.append("u-000001")
                    fact = {"outcome": "quarantined", "code": code, "path": path}
                    eid = event_id_of(pairs) if code not in ("json_syntax", "not_object") else None
                else:
                    text = render(pairs)
                    pii = pii_of(pairs, P)
                    fact = {"outcome": "valid"}
                    eid = event_id_of(pairs)
                lines.append(text)
                if expect:
                    fact = dict({"line": done + len(facts), "event_id": eid}, **fact)
                    fact["pii"] = pii
                    facts.append(json.dumps(fact, ensure_ascii=False))
            lines.append("")
            # surrogate escapes stand for the bytes inv_invalid_utf8 breaks
            out.write("\n".join(lines).encode("utf-8", "surrogateescape"))
            if expect:
                facts.append("")
                expect.write("\n".join(facts).encode("utf-8"))
            done += m
        out.flush()
        if expect:
            expect.close()
    except BrokenPipeError:
        return 1
    finally:
        try:
            out.close()
        except BrokenPipeError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
