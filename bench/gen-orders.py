#!/usr/bin/python3
"""Generate synthetic JSON Lines records for contracts/bench-orders.yaml.

Usage: gen-orders.py [--records N] [--seed S] [-o FILE]

Every record is valid under the contract: formats (uuid, email, date-time,
date, ipv4), patterns, enums, numeric ranges, a nested object (shipping and
its address) and nested arrays of objects (items, payments), about 500 bytes
on average.  Output is deterministic for a given seed and record count.
Standard library only; writes UTF-8 to FILE or stdout.
"""

import argparse
import json
import random
import sys

CHUNK = 8192  # records per write

STATUSES = ["pending"] * 5 + ["paid"] * 20 + ["shipped"] * 25 + \
    ["delivered"] * 40 + ["cancelled"] * 6 + ["refunded"] * 4
CHANNELS = ["web"] * 50 + ["ios"] * 20 + ["android"] * 20 + ["store"] * 7 + ["phone"] * 3
CURRENCIES = ["EUR", "EUR", "EUR", "USD", "USD", "GBP", "CHF", "SEK", "JPY"]
METHODS = ["standard"] * 6 + ["express"] * 2 + ["pickup", "same_day"]
PAY_METHODS = ["card"] * 6 + ["paypal"] * 2 + ["klarna", "gift_card", "bank_transfer"]
OFFSETS = ["Z"] * 6 + ["+01:00", "+02:00", "-05:00", "+09:00", "+05:30"]
COUPONS = ["SPRING25", "WELCOME10", "VIP2026", "FREESHIP", "BLACKFRI", "LOYAL5", "B2B15"]

FIRST = ["anna", "ben", "carla", "david", "elena", "felix", "grace", "hiro",
         "ines", "jonas", "kofi", "lena", "marco", "nadia", "oscar", "priya",
         "quinn", "rosa", "sam", "tara", "umar", "vera", "wei", "xenia"]
LAST = ["smith", "mueller", "garcia", "rossi", "kowalski", "tanaka", "nguyen",
        "johnson", "schmidt", "dubois", "silva", "ivanova", "okafor", "brown"]
DOMAINS = ["example.com", "example.org", "mail.example.com", "shop.example.net",
           "corp.example.co.uk", "posteo.example.de"]
PLACES = [("DE", "10115", "Berlin"), ("DE", "80331", "München"), ("GB", "SW1A 1AA", "London"),
          ("GB", "M1 1AE", "Manchester"), ("FR", "75001", "Paris"), ("NL", "1012 AB", "Amsterdam"),
          ("US", "10001", "New York"), ("US", "94103", "San Francisco"), ("JP", "100-0001", "東京"),
          ("SE", "111 20", "Stockholm"), ("CH", "8001", "Zürich"), ("ES", "28013", "Madrid"),
          ("IT", "00184", "Roma"), ("PL", "00-001", "Warszawa"), ("AT", "1010", "Wien")]
PRODUCTS = {
    "audio": ["Wireless headphones", "Bluetooth speaker", "Earbuds Pro", "Soundbar 2.1"],
    "computers": ["Laptop sleeve 14\"", "Mechanical keyboard", "4K monitor 27\"", "USB-C hub"],
    "phones": ["Phone case", "USB-C charger 65W", "Screen protector", "Power bank 20000mAh"],
    "home": ["Linen duvet cover", "Desk lamp", "Wall clock", "Storage boxes (3)"],
    "kitchen": ["Espresso machine", "Coffee grinder", "Chef's knife", "Cast-iron pan 28cm"],
    "fashion": ["Linen shirt", "Winter jacket", "Running shoes", "Wool scarf"],
    "sports": ["Yoga mat", "Dumbbells 2x5kg", "Cycling gloves", "Water bottle 750ml"],
    "toys": ["Building blocks set", "Puzzle 1000 pieces", "Plush bear", "Kids backpack"],
    "books": ["Cookbook: Nordic baking", "Field guide to birds", "Notebook A5 dotted", "Atlas"],
}


def js(s):
    """JSON string literal, compact, UTF-8 kept as is."""
    return json.dumps(s, ensure_ascii=False)


def uuid4(bits):
    u = bits(128)
    u = (u & ~(0xF << 76) | (0x4 << 76)) & ~(0x3 << 62) | (0x2 << 62)
    h = "%032x" % u
    return '"%s-%s-%s-%s-%s"' % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def money(cents):
    return "%d.%02d" % (cents // 100, cents % 100)


def build_pools(rng):
    """Precomputed JSON fragments; everything drawn from rng."""
    days = []
    mdays = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    for y in (2025, 2026):
        for m in range(1, 13):
            for d in range(1, mdays[m - 1] + 1):
                days.append("%04d-%02d-%02d" % (y, m, d))

    emails = []
    for _ in range(20000):
        f, l = rng.choice(FIRST), rng.choice(LAST)
        local = "%s.%s%d" % (f, l, rng.randrange(1, 100)) if rng.random() < 0.6 else "%s%s" % (f[0], l)
        if rng.random() < 0.05:
            local = local.capitalize()  # tokens see it lower-cased (format: email)
        emails.append(js(local + "@" + rng.choice(DOMAINS)))

    products = []
    for cat, names in PRODUCTS.items():
        for name in names:
            for _ in range(25):
                sku = '"%s-%05d"' % (cat[:3].upper(), rng.randrange(100000))
                products.append((sku, js(name), js(cat), rng.randrange(199, 60000)))

    addresses = []
    for country, postal, city in PLACES:
        addresses.append('{"country":"%s","postal_code":%s,"city":%s}' % (country, js(postal), js(city)))
        addresses.append('{"country":"%s","city":%s}' % (country, js(city)))

    ips = ['"%d.%d.%d.%d"' % (rng.randrange(1, 224), rng.randrange(256), rng.randrange(256),
                              rng.randrange(1, 255)) for _ in range(2000)]
    return {"days": days, "emails": emails, "products": products, "addresses": addresses, "ips": ips}


def timestamp(bits, day):
    t = bits(27) % 86400000
    return '"%sT%02d:%02d:%02d.%03d%s"' % (day, t // 3600000, t // 60000 % 60, t // 1000 % 60, t % 1000,
                                           OFFSETS[bits(8) % len(OFFSETS)])


def make_record(rng, P):
    bits = rng.getrandbits
    rnd = rng.random
    days = P["days"]
    di = bits(20) % (len(days) - 10)
    day = days[di]
    status = STATUSES[bits(7) % len(STATUSES)]
    channel = CHANNELS[bits(7) % len(CHANNELS)]
    parts = ['"order_id":' + uuid4(bits),
             '"order_number":"ORD-%s-%07d"' % (day[:4], bits(23) % 10000000),
             '"status":"%s"' % status,
             '"placed_at":' + timestamp(bits, day)]
    if rnd() < 0.2:
        parts.append('"updated_at":' + timestamp(bits, days[di + 1 + bits(2)]))
    parts.append('"customer_id":"C%08d"' % (bits(24) % 5000000))
    parts.append('"customer_email":' + P["emails"][bits(16) % len(P["emails"])])
    parts.append('"channel":"%s"' % channel)
    if channel == "store":
        parts.append('"terminal_ip":' + P["ips"][bits(11) % len(P["ips"])])
    parts.append('"currency":"%s"' % CURRENCIES[bits(4) % len(CURRENCIES)])

    items, total, count = [], 0, 0
    for _ in range(1 + (rnd() < 0.2) + (rnd() < 0.05)):
        sku, name, cat, price = P["products"][bits(10) % len(P["products"])]
        qty = 1 + (bits(3) % 3 if rnd() < 0.3 else 0)
        total += qty * price
        count += qty
        item = '{"sku":%s,"name":%s' % (sku, name) if rnd() < 0.6 else '{"sku":%s' % sku
        item += ',"quantity":%d,"unit_price":%s' % (qty, money(price))
        items.append(item + (',"category":%s}' % cat if rnd() < 0.5 else "}"))
    cost = 0 if total >= 5000 else 495
    total += cost
    parts.append('"total":' + money(total))
    parts.append('"item_count":%d' % count)
    if rnd() < 0.1:
        parts.append('"gift":true')
    if rnd() < 0.15:
        parts.append('"coupon":"%s"' % COUPONS[bits(3) % len(COUPONS)])
    ship = '"method":"%s"' % METHODS[bits(4) % len(METHODS)]
    if rnd() < 0.8:
        ship += ',"promised_date":"%s"' % days[di + 2 + bits(3)]
    if cost or rnd() < 0.3:
        ship += ',"cost":%s' % money(cost)
    ship += ',"address":%s' % P["addresses"][bits(5) % len(P["addresses"])]
    parts.append('"shipping":{' + ship + "}")
    parts.append('"items":[' + ",".join(items) + "]")
    if status != "pending":
        pays, left = [], total
        if rnd() < 0.05 and total > 1000:
            gift = 500 + bits(9)
            pays.append('{"transaction_id":%s,"method":"gift_card","amount":%s}' % (uuid4(bits), money(gift)))
            left -= gift
        method = PAY_METHODS[bits(4) % len(PAY_METHODS)]
        pay = '{"transaction_id":%s,"method":"%s","amount":%s' % (uuid4(bits), method, money(left))
        pays.append(pay + (',"authorised_at":%s}' % timestamp(bits, day) if rnd() < 0.3 else "}"))
        parts.append('"payments":[' + ",".join(pays) + "]")
    return "{" + ",".join(parts) + "}"


def generate(doc, build_pools, make_record):
    """The command line of a generator (bench/gen-mixed.py uses it too):
    --records N of make_record(rng, pools), seeded, to -o or stdout."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", default="-")
    args = ap.parse_args()
    if args.records < 0:
        ap.error("--records must be >= 0")
    rng = random.Random(args.seed)
    pools = build_pools(rng)
    out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
    left = args.records
    while left > 0:
        n = min(CHUNK, left)
        out.write("\n".join(make_record(rng, pools) for _ in range(n)) + "\n")
        left -= n
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    generate(__doc__, build_pools, make_record)
