#!/usr/bin/python3
"""Generate synthetic JSON Lines records for contracts/user-events.yaml.

Usage: gen-user-events.py [--records N] [--seed S] [--invalid-rate R] [-o FILE]

Records are valid under the contract unless --invalid-rate R (0..1) is given;
then about that fraction of records is broken in exactly one way (see
INVALID_KINDS).  Output is deterministic for a given seed and arguments.
Standard library only; writes UTF-8 to FILE or stdout.
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
    for _ in range(6000):
        r = rng.random()
        if r < 0.45:
            s = rng.choice(SEARCHES)
        else:
            s = rng.choice(FEEDBACK)
            s = s.replace("{email}", email())
            s = s.replace("{phone}", rng.choice(PHONES))
            s = s.replace("{ip}", ip())
            s = s.replace("{order}", "#%d-%04d" % (rng.randrange(100, 999),
                                                  rng.randrange(10000)))
        messages.append(js(s))

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
# Invalid variants: each breaks exactly one rule of the contract.

def inv_missing_required(rng, pairs):
    key = rng.choice(["event_id", "event_type", "occurred_at", "user_id",
                      "consent", "device", "device.os"])
    if key == "device.os":
        setp(pairs, "device", '{"os_version":"14.2","model":"Pixel 8"}')
        return render(pairs)
    return render([kv for kv in pairs if kv[0] != key])


def inv_type(rng, pairs):
    key, val = rng.choice([("consent", '"yes"'), ("session_ms", '"1234"'),
                           ("session_ms", "12.5"), ("user_id", "123456"),
                           ("amount", '"19.99"'), ("tags", '"promo,beta"'),
                           ("device", '"android"'),
                           ("event_type", '["click"]')])
    setp(pairs, key, val)
    return render(pairs)


def inv_enum(rng, pairs):
    if rng.random() < 0.5:
        setp(pairs, "event_type", rng.choice(['"pageview"', '"Click"',
                                              '"add_to_cart"']))
    else:
        setp(pairs, "device", '{"os":"chromeos","os_version":"120"}')
    return render(pairs)


def inv_pattern(rng, pairs):
    if rng.random() < 0.7:
        setp(pairs, "country", rng.choice(['"usa"', '"de"', '"U1"']))
    else:
        setp(pairs, "device", '{"os":"ios","os_version":"17.x"}')
    return render(pairs)


def inv_range(rng, pairs):
    key, val = rng.choice([("session_ms", "-5"), ("session_ms", "86400001"),
                           ("amount", "-1.50"), ("amount", "1000000"),
                           ("received_date", '"2101-01-01"'),
                           ("occurred_at", '"2014-12-31T23:59:59Z"')])
    setp(pairs, key, val)
    return render(pairs)


def inv_length(rng, pairs):
    r = rng.random()
    if r < 0.5:
        setp(pairs, "tags", "[" + ",".join(['"t%d"' % i for i in range(17)]) + "]")
    elif r < 0.7:
        setp(pairs, "user_id", '""')
    elif r < 0.85:
        setp(pairs, "tags", '["promo","' + "x" * 33 + '"]')
    else:
        setp(pairs, "message", js("spam " * 401))
    return render(pairs)


def inv_format(rng, pairs):
    key, val = rng.choice([("email", '"not-an-email"'),
                           ("client_ip", '"999.12.0.1"'),
                           ("event_id", '"not-a-uuid"'),
                           ("occurred_at", '"2026-03-14T09:26:53"'),
                           ("received_date", '"2026-02-30"'),
                           ("page_url", '"www.example.com/cart"')])
    setp(pairs, key, val)
    return render(pairs)


def inv_unknown_field(rng, pairs):
    pairs.insert(rng.randrange(len(pairs) + 1),
                 (rng.choice(["debug", "userAgent", "experiment"]), '"x"'))
    return render(pairs)


def inv_not_object(rng, pairs):
    return "[" + ",".join(v for _, v in pairs[:4]) + "]"


def inv_json_syntax(rng, pairs):
    s = render(pairs)
    return s[: rng.randrange(1, len(s) - 1)]


def inv_duplicate_key(rng, pairs):
    s = render(pairs)
    # hand-written raw text: a second "user_id" member before the closing brace
    return s[:-1] + ',"user_id":"u-000001"}'


INVALID_KINDS = [inv_missing_required, inv_type, inv_enum, inv_pattern,
                 inv_range, inv_length, inv_format, inv_unknown_field,
                 inv_not_object, inv_json_syntax, inv_duplicate_key]


# --------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Generate JSON Lines records for contracts/user-events.yaml")
    ap.add_argument("--records", type=int, default=1000, metavar="N")
    ap.add_argument("--seed", type=int, default=1, metavar="S")
    ap.add_argument("--invalid-rate", type=float, default=0.0, metavar="R")
    ap.add_argument("-o", "--output", metavar="FILE")
    a = ap.parse_args(argv)
    if a.records < 0:
        ap.error("--records must be >= 0")
    if not 0.0 <= a.invalid_rate <= 1.0:
        ap.error("--invalid-rate must be in [0, 1]")

    rng = random.Random(a.seed)
    P = build_pools(rng)
    rate = a.invalid_rate

    if a.output and a.output != "-":
        out = open(a.output, "w", encoding="utf-8", newline="\n")
    else:
        out = open(sys.stdout.fileno(), "w", encoding="utf-8", newline="\n",
                   closefd=False)
    try:
        n = a.records
        done = 0
        while done < n:
            m = min(CHUNK, n - done)
            lines = []
            app = lines.append
            if rate > 0:
                for _ in range(m):
                    pairs = make_pairs(rng, P)
                    if rng.random() < rate:
                        app(rng.choice(INVALID_KINDS)(rng, pairs))
                    else:
                        app(render(pairs))
            else:
                for _ in range(m):
                    app(render(make_pairs(rng, P)))
            lines.append("")
            out.write("\n".join(lines))
            done += m
        out.flush()
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
