"""The expert player: toggle every lamp that is still off."""


def expert(adapter) -> list[str]:
    return [f"toggle {k}" for k, on in adapter.lamps.on.items() if not on]
