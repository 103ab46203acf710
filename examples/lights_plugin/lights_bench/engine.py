"""The engine: a row of lamps that a command toggles (a stand-in for your simulator)."""

TASKS = {"two": ["desk", "hall"], "three": ["desk", "hall", "porch"]}


class Lamps:
    def __init__(self, names: list[str]):
        self.on = dict.fromkeys(names, False)

    def toggle(self, name: str) -> bool:
        """Flip one lamp; False when there is no such lamp (the engine refuses)."""
        if name not in self.on:
            return False
        self.on[name] = not self.on[name]
        return True
