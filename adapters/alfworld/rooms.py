"""Room templates for generated ALFWorld games.

Receptacle and object classes are ALFRED's own names; which object a receptacle can hold
comes from ``alfworld.gen.constants.VAL_RECEPTACLE_OBJECTS`` at generation time, so the
templates only say what plausibly belongs in each kind of room.
"""

from __future__ import annotations

# receptacle class -> how many instances a room may hold at most
ROOMS: dict[str, dict[str, dict[str, int] | list[str]]] = {
    "Kitchen": {
        "receptacles": {
            "CounterTop": 2, "Cabinet": 4, "Drawer": 3, "Fridge": 1, "Microwave": 1, "SinkBasin": 1,
            "StoveBurner": 2, "DiningTable": 1, "GarbageCan": 1, "CoffeeMachine": 1, "Shelf": 2,
            "SideTable": 1, "Toaster": 1,
        },
        "objects": [
            "Apple", "Bread", "Tomato", "Potato", "Lettuce", "Egg", "Mug", "Cup", "Bowl", "Plate",
            "Fork", "Spoon", "Knife", "ButterKnife", "Spatula", "Ladle", "Pan", "Pot", "Kettle",
            "SaltShaker", "PepperShaker", "DishSponge", "SoapBottle", "WineBottle", "Vase",
            "CellPhone", "CreditCard", "PaperTowel",
        ],
    },
    "Bathroom": {
        "receptacles": {
            "CounterTop": 1, "Cabinet": 3, "Drawer": 2, "SinkBasin": 1, "Toilet": 1, "GarbageCan": 1,
            "TowelHolder": 1, "HandTowelHolder": 1, "ToiletPaperHanger": 1, "Shelf": 2, "BathtubBasin": 1,
            "Cart": 1,
        },
        "objects": [
            "SoapBar", "SoapBottle", "SprayBottle", "ToiletPaper", "TissueBox", "Candle", "Cloth",
            "DishSponge", "HandTowel", "Plunger", "Towel",
        ],
    },
    "Bedroom": {
        "receptacles": {
            "Bed": 1, "Desk": 1, "Drawer": 3, "Dresser": 1, "Shelf": 3, "SideTable": 2, "GarbageCan": 1,
            "Safe": 1, "LaundryHamper": 1, "ArmChair": 1,
        },
        "objects": [
            "Book", "CellPhone", "KeyChain", "AlarmClock", "CD", "Pen", "Pencil", "Laptop", "Pillow",
            "CreditCard", "BaseballBat", "BasketBall", "TennisRacket", "Watch", "Vase", "Statue", "Mug",
            "Bowl",
        ],
    },
    "LivingRoom": {
        "receptacles": {
            "Sofa": 1, "ArmChair": 2, "CoffeeTable": 1, "SideTable": 2, "TVStand": 1, "Shelf": 3,
            "Drawer": 3, "Cabinet": 2, "Dresser": 1, "GarbageCan": 1, "Ottoman": 1, "DiningTable": 1,
        },
        "objects": [
            "RemoteControl", "Newspaper", "KeyChain", "CreditCard", "Statue", "Vase", "Laptop", "Pillow",
            "Box", "Book", "Watch", "WateringCan", "TissueBox", "Candle", "Plate", "Bowl",
        ],
    },
}

# the appliance a transformation needs, and the ALFRED action-object set it draws from
TRANSFORM_APPLIANCE = {"clean": "SinkBasin", "heat": "Microwave", "cool": "Fridge"}
TRANSFORM_SET = {"clean": "Cleanable", "heat": "Heatable", "cool": "Coolable"}

# lamps (never pickupable in ALFRED; only toggled) and receptacles that can hold them
LAMPS = ("DeskLamp", "FloorLamp")
LAMP_HOSTS = ("Desk", "SideTable", "Dresser")

# canContain rules beyond VAL_RECEPTACLE_OBJECTS (towels only list TowelHolder there)
EXTRA_CAN_CONTAIN: dict[str, set[str]] = {"Towel": {"TowelHolder"}}
