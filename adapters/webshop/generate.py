"""Deterministic generator of the bundled WebShop-protocol catalogue (NOT the official data).

    python -m rubricgym.adapters.webshop.generate          # rewrite data/*.json
    python -m rubricgym.adapters.webshop.generate --check  # fail if they differ

Twelve product types, six families per type, five near-duplicate variants per family: the
base product, one with an attribute swapped, one without the goal's option values, one
priced above the goal's bound, one with an attribute dropped and a different price. So a
search alone does not solve a goal: the right variant, options and price must be checked.
Goals (two per family; four families per type train, two eval) are written in WebShop's
synthetic-goal format: "<request> <type> <relative> <attributes> with <option>: <value>,
and <option>: <value>, and price lower than X.00 dollars". The generator verifies every
goal: the target is in the top 50 hits of a search for the instruction, buying it with the
goal options scores 1.0, and no attribute or option value leaks into a product's text.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass

from rubricgym.adapters.webshop.catalogue import (
    BUNDLED_LABEL, GOALS_FILE, PRODUCTS_FILE, Catalogue, Goal, Product, Review, read_catalogue, write_catalogue,
)
from rubricgym.adapters.webshop.reward import attribute_matched, purchase_reward
from rubricgym.adapters.webshop.search import ProductIndex

SEED = 20261201
FAMILIES_PER_TYPE = 6
TRAIN_FAMILIES = 4
GOALS_PER_FAMILY = 2
PRICE_STEPS = [10.0 * i for i in range(1, 100)]


@dataclass(frozen=True)
class ProductType:
    key: str
    noun: str
    query: str
    path: tuple[str, str, str]
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price: tuple[int, int]
    brands: tuple[str, ...]
    series: tuple[str, ...]


TYPES: tuple[ProductType, ...] = (
    ProductType("headphones", "headphones", "over-ear headphones", ("electronics", "audio", "headphones"),
                ("noise cancelling", "bluetooth 5.3", "foldable design", "built-in microphone", "fast charging",
                 "plush ear cushions"),
                {"color": ("black", "white", "silver", "rose gold", "forest green"), "style": ("standard", "deluxe", "sport")},
                (25, 140), ("Sonova", "Auralis", "Beatrix", "Quietline", "Tonic", "Pulsar"),
                ("Studio", "Voyager", "Echo", "Nimbus")),
    ProductType("tshirt", "t-shirt", "men's t-shirts", ("clothing", "men", "t-shirts"),
                ("machine wash", "short sleeve", "cotton spandex", "slim fit", "moisture wicking", "crew neck"),
                {"color": ("navy", "heather gray", "charcoal", "olive", "burgundy"),
                 "size": ("small", "medium", "large", "x-large", "xx-large")},
                (9, 35), ("Northcrest", "Ardent", "Fieldhouse", "Lumen Apparel", "Tidewater", "Brickline"),
                ("Everyday", "Heritage", "Core", "Classic")),
    ProductType("shoes", "running shoes", "running shoes", ("footwear", "athletic", "running shoes"),
                ("arch support", "breathable mesh", "non slip outsole", "lightweight", "wide toe box",
                 "reflective details"),
                {"color": ("black", "white", "royal blue", "coral", "slate"), "size": ("7", "8", "9", "10", "11")},
                (35, 120), ("Stridex", "Fleetfoot", "Kinetix", "Paceline", "Runwell", "Trailmark"),
                ("Glide", "Tempo", "Surge", "Drift")),
    ProductType("coffee", "coffee", "ground coffee", ("grocery", "beverages", "coffee"),
                ("medium roast", "fair trade", "single origin", "low acid", "usda organic", "kosher certified"),
                {"flavor name": ("hazelnut", "french vanilla", "caramel", "breakfast blend", "mocha"),
                 "size": ("12 ounce", "24 ounce", "2 pound")},
                (7, 30), ("Bean Harbor", "Copperpot", "Highland Brew", "Morning Ritual", "Cafe Serra", "Roastery Row"),
                ("Reserve", "House", "Signature", "Estate")),
    ProductType("shampoo", "shampoo", "shampoo", ("beauty", "hair care", "shampoo"),
                ("sulfate free", "paraben free", "argan oil", "color safe", "tea tree", "cruelty free"),
                {"scent": ("lavender", "coconut", "eucalyptus mint", "unscented", "citrus"),
                 "size": ("8 fl oz", "16 fl oz", "33.8 fl oz")},
                (6, 32), ("Verdant", "Silkroot", "Purely Botanic", "Hairloom", "Aqualis", "Mane Street"),
                ("Daily", "Repair", "Volume", "Balance")),
    ProductType("backpack", "backpack", "laptop backpack", ("bags", "luggage", "backpacks"),
                ("water resistant", "usb charging port", "anti theft", "padded shoulder straps",
                 "luggage strap", "hidden pocket"),
                {"color": ("black", "gray", "navy", "camo", "maroon"), "style": ("classic", "slim", "expandable")},
                (20, 90), ("Packwell", "Urbanix", "Trekker", "Carryall", "Nomad Gear", "Summit Supply"),
                ("Commuter", "Metro", "Explorer", "Transit")),
    ProductType("phonecase", "phone case", "phone case", ("electronics", "accessories", "phone cases"),
                ("shockproof", "slim profile", "magsafe compatible", "kickstand", "card holder", "raised bezels"),
                {"color": ("clear", "black", "lavender", "sage", "red"),
                 "size": ("iphone 14", "iphone 15", "iphone 15 pro", "galaxy s23")},
                (8, 40), ("Armorlite", "Casewise", "Shellguard", "Pocketry", "Tough Skin", "Vault"),
                ("Guard", "Edge", "Shield", "Flex")),
    ProductType("lamp", "desk lamp", "led desk lamp", ("home", "lighting", "desk lamps"),
                ("dimmable", "touch control", "eye caring", "adjustable arm", "auto off timer", "wireless charger"),
                {"color": ("black", "white", "silver", "walnut"), "style": ("clamp", "base", "swing arm")},
                (18, 75), ("Lumina", "Brightway", "Glowhaus", "Deskmate", "Halo Home", "Lampwright"),
                ("Focus", "Study", "Arc", "Beam")),
    ProductType("yogamat", "yoga mat", "yoga mat", ("sports", "fitness", "yoga mats"),
                ("extra thick", "non slip", "eco friendly", "carrying strap", "alignment lines", "sweat resistant"),
                {"color": ("purple", "teal", "black", "pink", "gray"),
                 "size": ("68 x 24 inch", "72 x 26 inch", "72 x 32 inch")},
                (15, 60), ("Zenflow", "Asana Works", "Groundly", "Lotus Lane", "Balance Co", "Stretchwell"),
                ("Pro", "Essential", "Studio", "Travel")),
    ProductType("bottle", "water bottle", "insulated water bottle", ("sports", "outdoor", "water bottles"),
                ("vacuum insulated", "leak proof", "bpa free", "wide mouth", "straw lid", "dishwasher safe"),
                {"color": ("black", "white", "sky blue", "mint", "orange"), "size": ("18 oz", "32 oz", "40 oz")},
                (12, 45), ("Hydrova", "Aquaflask", "Chillcore", "Trailwater", "Summit Sip", "Frostline"),
                ("Hike", "Daily", "Peak", "Urban")),
    ProductType("candle", "candle", "scented candle", ("home", "decor", "candles"),
                ("soy wax", "long burning", "cotton wick", "hand poured", "non toxic", "gift ready"),
                {"scent": ("vanilla bean", "sea salt", "sandalwood", "fresh linen", "pumpkin spice"),
                 "size": ("8 oz", "12 oz", "16 oz")},
                (10, 38), ("Wickwell", "Hearthlight", "Emberly", "Calm Glow", "Waxworks", "Flicker House"),
                ("Cozy", "Serene", "Classic", "Harvest")),
    ProductType("socks", "socks", "athletic socks", ("apparel", "accessories", "socks"),
                ("cushioned sole", "moisture control", "arch compression", "merino wool", "ankle length",
                 "seamless toe"),
                {"color": ("black", "white", "assorted", "navy", "gray"),
                 "size": ("shoe size 6-9", "shoe size 9-12", "shoe size 12-15")},
                (8, 30), ("Footloft", "Stepwise", "Cushy", "Sockwell", "Heelhaven", "Stride Co"),
                ("Crew", "Trainer", "Everyday", "Sport")),
)

NEUTRAL_FEATURES = (
    "Designed and tested for everyday use",
    "Backed by a one year warranty",
    "Ships in recyclable packaging",
    "Easy care instructions included",
)
DESCRIPTION_OPENERS = (
    "Meet the {name}.", "The {name} is made for people on the go.", "Say hello to the {name}.",
)
REVIEW_TEXTS = (
    ("Does the job", 4, "Works as described and arrived on time."),
    ("Great value", 5, "Very happy with this purchase, would buy again."),
    ("Okay", 3, "Decent overall, nothing special."),
    ("Not bad", 4, "Good quality for the money."),
)


def _asin(rng: random.Random, used: set[str]) -> str:
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
    while True:
        asin = "B0" + "".join(rng.choice(alphabet) for _ in range(8))
        if asin not in used:
            used.add(asin)
            return asin


def _product(t: ProductType, rng: random.Random, used: set[str], brand: str, series: str,
             attributes: list[str], options: dict[str, list[str]], price: float) -> Product:
    name = f"{brand} {series} {t.noun.title()}"
    title = f"{name} with {attributes[0].title()}"
    bullets = [f"{a.capitalize()}: a feature you will notice" for a in attributes]
    bullets.append(rng.choice(NEUTRAL_FEATURES))
    opener = rng.choice(DESCRIPTION_OPENERS).format(name=name)
    description = f"{opener} It comes with " + ", ".join(attributes) + "."
    reviews = [Review(title=r[0], score=r[1], body=r[2]) for r in rng.sample(REVIEW_TEXTS, 2)]
    rating = f"{rng.choice([3.9, 4.1, 4.3, 4.5, 4.7])}" if rng.random() < 0.7 else "N.A."
    return Product(
        asin=_asin(rng, used), product_type=t.key, category=t.path[0], query=t.query,
        product_category=" › ".join(t.path), Title=title, price=price, Rating=rating,
        Description=description, BulletPoints=bullets, Attributes=list(attributes),
        options=options, Reviews=reviews,
    )


def _goal_bound(rng: random.Random, price: float) -> float:
    """WebShop's rule: two of the next four multiples of ten above the price; the larger."""
    steps = [p for p in PRICE_STEPS if p > price][:4]
    return sorted(rng.sample(steps, 2))[1]


def _instruction(rng: random.Random, t: ProductType, attributes: list[str], options: dict[str, str],
                 bound: float) -> str:
    request = rng.choice(("i am looking for", "i need", "i want to buy", "i would like"))
    relative = rng.choice(("that is", "which is", "that has"))
    noun = t.noun if t.noun.endswith("s") else f"a {t.noun}"  # plural nouns take no article
    option_text = ", and ".join(f"{k}: {v}" for k, v in options.items())
    return f"{request} {noun} {relative} {' and '.join(attributes)} with {option_text}, and price lower than {bound:.2f} dollars"


def generate(seed: int = SEED) -> Catalogue:
    rng = random.Random(seed)
    used: set[str] = set()
    products: list[Product] = []
    goals: list[Goal] = []
    for t in TYPES:
        for f in range(FAMILIES_PER_TYPE):
            brand, series = t.brands[f], rng.choice(t.series)
            attrs = rng.sample(list(t.attributes), 3)
            spare = [a for a in t.attributes if a not in attrs]
            groups = sorted(t.options)
            full_opts = {g: sorted(rng.sample(list(t.options[g]), min(4, len(t.options[g]))),
                                   key=t.options[g].index) for g in groups}
            base_price = float(rng.randint(*t.price)) + rng.choice((0.99, 0.49, 0.0, 0.95))
            goal_opts = [{g: rng.choice(full_opts[g]) for g in groups} for _ in range(GOALS_PER_FAMILY)]
            # the option variant lacks every value any of this family's goals asks for
            thin_opts = {g: [v for v in t.options[g] if v not in {o[g] for o in goal_opts}] for g in groups}
            bounds = [_goal_bound(rng, base_price) for _ in goal_opts]
            high_price = max(bounds) + float(rng.randint(5, 30)) + 0.99
            swapped = attrs[:2] + [rng.choice(spare)]
            variants = [
                (attrs, full_opts, base_price),
                (swapped, full_opts, base_price),
                (attrs, thin_opts, base_price),
                (attrs, full_opts, high_price),
                (attrs[:2], full_opts, round(base_price * rng.choice((0.8, 0.9, 1.1)), 2)),
            ]
            family = [_product(t, rng, used, brand, series, list(a), {k: list(v) for k, v in o.items()}, p)
                      for a, o, p in variants]
            order = list(range(len(family)))
            rng.shuffle(order)
            products.extend(family[i] for i in order)
            split = "train" if f < TRAIN_FAMILIES else "eval"
            for g_index, (opts, bound) in enumerate(zip(goal_opts, bounds)):
                target = family[0]
                goals.append(Goal(
                    goal_id=f"{split}-{t.key}-{f}-{g_index}", split=split, asin=target.asin,
                    category=target.category, query=target.query, name=target.title,
                    product_category=target.product_category,
                    instruction_text=_instruction(rng, t, attrs, opts, bound),
                    attributes=list(attrs), goal_options=dict(opts), price_upper=bound,
                ))
    catalogue = Catalogue(source=BUNDLED_LABEL, products=products, goals=goals)
    verify(catalogue)
    return catalogue


def verify(catalogue: Catalogue) -> None:
    """Raise ``ValueError`` unless every goal is solvable and no product text leaks an
    attribute or option value it does not have."""
    types = {t.key: t for t in TYPES}
    problems: list[str] = []
    for p in catalogue.products:
        for attr in types[p.product_type].attributes:
            if attr not in p.attributes and attribute_matched(attr, p):
                problems.append(f"{p.asin}: text matches attribute {attr!r} it lacks")
        texts = " ".join([p.title, *p.bullet_points, p.description]).lower()
        for values in types[p.product_type].options.values():
            for v in values:
                if v in texts:
                    problems.append(f"{p.asin}: option value {v!r} appears in its text")
    index = ProductIndex(catalogue.products)
    by_asin = catalogue.by_asin()
    for g in catalogue.goals:
        if g.asin not in index.search(g.instruction_text):
            problems.append(f"{g.goal_id}: target not in the top hits of its instruction")
        target = by_asin[g.asin]
        if purchase_reward(target, g, target.price, g.goal_options).reward != 1.0:
            problems.append(f"{g.goal_id}: the target with the goal options does not score 1.0")
    if problems:
        raise ValueError("catalogue check failed:\n" + "\n".join(problems[:40]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = parser.parse_args(argv)
    catalogue = generate()
    if args.check:
        committed = read_catalogue(PRODUCTS_FILE, GOALS_FILE)
        same = committed.model_dump() == catalogue.model_dump()
        print("catalogue matches the generator" if same else "catalogue differs from the generator")
        return 0 if same else 1
    write_catalogue(catalogue)
    print(f"wrote {len(catalogue.products)} products and {len(catalogue.goals)} goals to {PRODUCTS_FILE.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
