"""The offline AppWorld scenarios: selectors x actions, each in three seeded variants.

Pure Python on ``world.py``'s data (no AppWorld import), so the main venv (tests, the
adapter's catalog) and AppWorld's venv (generation, ground truth) build the same list.

A *scenario* is a decision to make and a thing to do with it: "everyone tagged friend in
my contacts" x "pay them on Venmo", "the songs of a playlist" x "like them". A *variant*
draws the scenario's people, amounts, titles and dates from a seed. Each variant carries a
good solution (code cells, one per step) and a plausible wrong one, and a ``check`` (plain
data) that ``ground_truth.py`` turns into AppWorld evaluation code. Generation runs both
solutions through AppWorld's evaluator and refuses the variant unless good passes and
wrong fails.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

try:  # imported as a package module (main venv) or as a script neighbour (AppWorld's venv)
    from . import world as W
except ImportError:  # pragma: no cover - generation runs this file's folder on sys.path
    import world as W  # type: ignore[no-redef]

VARIANTS = 3
DEV_EVERY = 5  # every 5th scenario (by position) is held out for the dev split

PASSWORD_CELL = "pw = {a['account_name']: a['password'] for a in apis.supervisor.show_account_passwords()}\nme = apis.supervisor.show_profile()"
LOGIN = {
    "phone": "phone_tok = apis.phone.login(username=me['phone_number'], password=pw['phone'])['access_token']",
    **{app: f"{app}_tok = apis.{app}.login(username=me['email'], password=pw['{app}'])['access_token']"
       for app in ("venmo", "spotify", "todoist", "file_system", "simple_note", "gmail", "splitwise")},
}
COMPLETE = "apis.supervisor.complete_task()"


@dataclass(frozen=True)
class Variant:
    id: str
    scenario: str
    split: str
    instruction: str
    apps: list[str]
    operations: list[str]
    good: list[str]
    bad: list[str]
    check: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(id=self.id, scenario=self.scenario, split=self.split, instruction=self.instruction,
                    apps=self.apps, operations=self.operations, good=self.good, bad=self.bad, check=self.check)


def _login_cell(apps: list[str]) -> str:
    return "\n".join([PASSWORD_CELL] + [LOGIN[a] for a in sorted(set(apps))])


def _full(key: str) -> str:
    first, last, _, _ = W.PEOPLE[key]
    return f"{first} {last}"


CONTACT_KEYS = [k for k, _ in W.CONTACTS]
RELATIONSHIPS = dict(W.CONTACTS)

# ----------------------------------------------------------------------------- people
ALL_CONTACTS = """contacts, page = [], 0
while True:
    batch = apis.phone.search_contacts(access_token=phone_tok, page_index=page)
    if not batch:
        break
    contacts += batch
    page += 1"""
FIRST_PAGE_CONTACTS = "contacts = apis.phone.search_contacts(access_token=phone_tok)"
VENMO_ALL = """txs, page = [], 0
while True:
    batch = apis.venmo.show_transactions(access_token=venmo_tok, direction='{direction}'{extra}, page_index=page)
    if not batch:
        break
    txs += batch
    page += 1"""
VENMO_FIRST = "txs = apis.venmo.show_transactions(access_token=venmo_tok, direction='{direction}'{extra})"


def _received() -> list[tuple[str, float, int]]:
    return [(s, a, d) for s, r, a, d, _ in W.TRANSFERS if r == "ada"]


def _sent() -> list[tuple[str, float, int]]:
    return [(r, a, d) for s, r, a, d, _ in W.TRANSFERS if s == "ada"]


@dataclass(frozen=True)
class Selector:
    """Who the task is about: a phrase, the people it means, and code that finds them."""

    name: str
    params: tuple[Any, ...]
    needs_venmo: bool

    def phrase(self, p: Any) -> str:
        return {
            "byname": lambda: _full(p),
            "byrel": lambda: f"everyone tagged '{p}' in my phone contacts",
            "byemail": lambda: f"my contact whose email is {W.PEOPLE[p][2]}",
            "byphone": lambda: f"my contact whose phone number ends in {W.PEOPLE[p][3][-4:]}",
            "topsender": lambda: "the person who has sent me the most money in total on Venmo",
            "since": lambda: f"everyone who sent me money on Venmo on or after {p}",
            "largest": lambda: "whoever sent me the single largest Venmo payment",
            "lastpaid": lambda: "the person I most recently paid on Venmo",
            "mincount": lambda: f"everyone who has sent me at least {p} Venmo payments",
            "notpaidback": lambda: "everyone who sent me money on Venmo but whom I have never paid there",
        }[self.name]()

    def targets(self, p: Any) -> list[str]:
        received, sent = _received(), _sent()
        if self.name in ("byname", "byemail", "byphone"):
            return [p]
        if self.name == "byrel":
            return [k for k in CONTACT_KEYS if p in RELATIONSHIPS[k]]
        totals: Counter[str] = Counter()
        for who, amount, _ in received:
            totals[who] += amount
        if self.name == "topsender":
            return [totals.most_common(1)[0][0]]
        if self.name == "since":
            day = int(p[-2:])
            return sorted({who for who, _, d in received if d >= day}, key=CONTACT_KEYS.index)
        if self.name == "largest":
            return [max(received, key=lambda t: t[1])[0]]
        if self.name == "lastpaid":
            return [max(sent, key=lambda t: t[2])[0]]
        if self.name == "mincount":
            counts = Counter(who for who, _, _ in received)
            return sorted((w for w, n in counts.items() if n >= p), key=CONTACT_KEYS.index)
        if self.name == "notpaidback":
            paid = {who for who, _, _ in sent}
            return sorted({w for w, _, _ in received} - paid, key=CONTACT_KEYS.index)
        raise ValueError(self.name)

    def code(self, p: Any, wrong: bool = False) -> str:
        """Code that leaves the chosen contacts in ``people`` (``wrong``: a plausible slip)."""
        contacts = FIRST_PAGE_CONTACTS if wrong else ALL_CONTACTS
        venmo = VENMO_FIRST if wrong else VENMO_ALL
        pick = {
            "byname": lambda: f"people = [c for c in contacts if c['first_name'] + ' ' + c['last_name'] == {_full(p)!r}]",
            "byrel": lambda: f"people = [c for c in contacts if {p!r} in c['relationships']]",
            "byemail": lambda: f"people = [c for c in contacts if c['email'] == {W.PEOPLE[p][2]!r}]",
            "byphone": lambda: f"people = [c for c in contacts if c['phone_number'].endswith({W.PEOPLE[p][3][-4:]!r})]",
        }
        if self.name in pick:
            return contacts + "\n" + pick[self.name]()
        if self.name == "topsender":
            body = venmo.format(direction="received", extra="") + (
                "\ntotals = {}\nfor t in txs:\n    totals[t['sender']['email']] = totals.get(t['sender']['email'], 0) + t['amount']"
                "\nemails = {max(totals, key=totals.get)}")
        elif self.name == "since":
            body = venmo.format(direction="received", extra=f", min_created_at={p!r}") + (
                "\nemails = {t['sender']['email'] for t in txs}")
        elif self.name == "largest":
            body = venmo.format(direction="received", extra="") + (
                "\nemails = {max(txs, key=lambda t: t['amount'])['sender']['email']}")
        elif self.name == "lastpaid":
            body = venmo.format(direction="sent", extra="") + (
                "\nemails = {max(txs, key=lambda t: t['created_at'])['receiver']['email']}")
        elif self.name == "mincount":
            body = venmo.format(direction="received", extra="") + (
                "\ncounts = {}\nfor t in txs:\n    counts[t['sender']['email']] = counts.get(t['sender']['email'], 0) + 1"
                f"\nemails = {{e for e, n in counts.items() if n >= {p}}}")
        elif self.name == "notpaidback":
            body = (venmo.format(direction="received", extra="") + "\nreceived = {t['sender']['email'] for t in txs}\n"
                    + venmo.format(direction="sent", extra="") + "\nemails = received - {t['receiver']['email'] for t in txs}")
        else:
            raise ValueError(self.name)
        return body + "\n" + ALL_CONTACTS + "\npeople = [c for c in contacts if c['email'] in emails]"


SELECTORS = [
    Selector("byname", tuple(CONTACT_KEYS), False),
    Selector("byrel", ("friend", "coworker", "family"), False),
    Selector("byemail", tuple(CONTACT_KEYS), False),
    Selector("byphone", tuple(CONTACT_KEYS), False),
    Selector("topsender", (None,), True),
    Selector("since", ("2023-04-20", "2023-04-24", "2023-04-27"), True),
    Selector("largest", (None,), True),
    Selector("lastpaid", (None,), True),
    Selector("mincount", (2, 3, 4), True),
    Selector("notpaidback", (None,), True),
]

NOTES = ["Dinner at Luigi's", "Concert tickets", "Book club", "Taxi home", "Pizza night", "Museum passes",
         "Farmers market", "Board games", "Bowling", "Picnic supplies"]
MESSAGES = ["Happy birthday! See you on Sunday.", "Running ten minutes late.", "Thanks for yesterday!",
            "Can you call me tonight?", "The meeting moved to 3 pm.", "Dinner is at 7, see you there."]
SUBJECTS = ["Weekend plans", "Quick question", "Project update", "Thank you", "Reunion photos", "Trip ideas"]
BODIES = ["Let me know what you think.", "Talk soon!", "Looking forward to it.", "Hope you are well."]
TITLES = ["Gift ideas", "People to thank", "Party guests", "Weekend crew", "Book club list", "Hiking group"]
VERBS = ["Call", "Thank", "Invite", "Visit", "Email"]
FILES = ["guests", "thank_you", "invitees", "team", "club", "crew"]
GROUPS = ["Beach House", "Ski Trip", "Book Club", "Road Trip", "Game Night", "Lake Cabin"]


def _amount(rng: random.Random) -> float:
    return rng.choice([5, 7.5, 12, 15, 18.25, 20, 24.5, 30, 36, 42.5])


def _person_action(action: str, sel: Selector, p: Any, rng: random.Random) -> dict[str, Any]:
    """Instruction tail, apps, operations, good/bad action code (on ``people``), check."""
    who = sel.phrase(p)
    targets = sel.targets(p)
    if action == "pay":
        amount, note = _amount(rng), rng.choice(NOTES)
        code = ("for c in people:\n    apis.venmo.create_transaction(access_token=venmo_tok, receiver_email=c['email'], "
                f"amount={amount!r}, description={note!r})")
        slip = code.replace("create_transaction(", "create_payment_request(").replace("receiver_email=", "user_email=")
        return dict(text=f"Send ${amount:g} on Venmo to {who}, with the note \"{note}\".", apps=["venmo"],
                    ops=["read", "send"], good=code, bad=slip,
                    check=dict(kind="pay", targets=targets, amount=amount, note=note))
    if action == "request":
        amount, note = _amount(rng), rng.choice(NOTES)
        code = ("for c in people:\n    apis.venmo.create_payment_request(access_token=venmo_tok, user_email=c['email'], "
                f"amount={amount!r}, description={note!r})")
        slip = code.replace(f"amount={amount!r}", f"amount={amount * len(targets) + 1!r}")
        return dict(text=f"Request ${amount:g} on Venmo from {who}, with the description \"{note}\".", apps=["venmo"],
                    ops=["read", "create"], good=code, bad=slip,
                    check=dict(kind="request", targets=targets, amount=amount, note=note))
    if action == "text":
        message = rng.choice(MESSAGES)
        code = f"for c in people:\n    apis.phone.send_text_message(access_token=phone_tok, phone_number=c['phone_number'], message={message!r})"
        slip = code.replace(f"message={message!r}", f"message={' '.join(message.split()[:-1])!r}")
        return dict(text=f"Text {who} this message on my phone: \"{message}\"", apps=["phone"], ops=["read", "send"],
                    good=code, bad=slip, check=dict(kind="text", targets=targets, message=message))
    if action == "email":
        subject, body = rng.choice(SUBJECTS), rng.choice(BODIES)
        code = (f"apis.gmail.send_email(access_token=gmail_tok, email_addresses=[c['email'] for c in people], "
                f"subject={subject!r}, body={body!r})")
        slip = code.replace("[c['email'] for c in people]", "[me['email']]")
        return dict(text=f"Send an email from Gmail to {who} with the subject \"{subject}\" and the body \"{body}\".",
                    apps=["gmail"], ops=["read", "send"], good=code, bad=slip,
                    check=dict(kind="email", targets=targets, subject=subject, body=body))
    if action == "note":
        title = rng.choice(TITLES)
        code = (f"apis.simple_note.create_note(access_token=simple_note_tok, title={title!r}, "
                "content='\\n'.join(sorted(c['first_name'] + ' ' + c['last_name'] for c in people)))")
        slip = code.replace("'\\n'.join(sorted(c['first_name'] + ' ' + c['last_name'] for c in people))",
                            "', '.join(c['first_name'] for c in people)")
        return dict(text=f"Create a note in Simple Note titled \"{title}\" listing the full name of {who}, "
                         "one per line, in alphabetical order.", apps=["simple_note"], ops=["read", "create"],
                    good=code, bad=slip, check=dict(kind="note", targets=targets, title=title))
    if action == "todo":
        verb, project = rng.choice(VERBS), rng.choice(["Inbox", "Home", "Work"])
        code = (f"pid = [p for p in apis.todoist.show_projects(access_token=todoist_tok) if p['name'] == {project!r}][0]['project_id']\n"
                "for c in people:\n"
                f"    apis.todoist.create_task(access_token=todoist_tok, project_id=pid, title={verb + ' '!r} + c['first_name'] + ' ' + c['last_name'])")
        slip = code.replace(f"p['name'] == {project!r}]", "p['is_inbox'] != " + ("False" if project != "Inbox" else "True") + "]")
        return dict(text=f"In my Todoist project \"{project}\", add one task titled \"{verb} <full name>\" for each of "
                         f"{who}.", apps=["todoist"], ops=["read", "create"], good=code, bad=slip,
                    check=dict(kind="todo", targets=targets, verb=verb, project=project))
    if action == "file":
        name = rng.choice(FILES)
        code = (f"apis.file_system.create_file(access_token=file_system_tok, file_path='~/documents/{name}.txt', "
                "content='\\n'.join(sorted(c['email'] for c in people)))")
        slip = code.replace(f"'~/documents/{name}.txt'", f"'~/{name}.txt'")
        return dict(text=f"Save the email addresses of {who} in a new file ~/documents/{name}.txt in my file system, "
                         "one per line, sorted.", apps=["file_system"], ops=["read", "create"], good=code, bad=slip,
                    check=dict(kind="file", targets=targets, path=f"documents/{name}.txt"))
    if action == "group":
        group = rng.choice(GROUPS)
        code = (f"apis.splitwise.create_group(access_token=splitwise_tok, name={group!r}, "
                "member_emails=[c['email'] for c in people])")
        slip = code.replace("[c['email'] for c in people]", "[c['email'] for c in people][:1] + ['edsger.dijkstra@gmail.com']")
        return dict(text=f"Create a Splitwise group named \"{group}\" whose members are me and {who}.",
                    apps=["splitwise"], ops=["read", "create"], good=code, bad=slip,
                    check=dict(kind="group", targets=targets, group=group))
    if action == "answer":
        answer = ", ".join(sorted(W.PEOPLE[k][0] for k in targets))
        code = "apis.supervisor.complete_task(answer=', '.join(sorted(c['first_name'] for c in people)))"
        slip = "apis.supervisor.complete_task(answer=', '.join(c['last_name'] for c in people))"
        return dict(text=f"What are the first names of {who}? Answer with the first names in alphabetical "
                         "order, separated by a comma and a space.", apps=[], ops=["read", "answer"], good=code,
                    bad=slip, check=dict(kind="answer", answer=answer), completes=True)
    raise ValueError(action)


PERSON_ACTIONS = ["pay", "request", "text", "email", "note", "todo", "file", "group", "answer"]

# ----------------------------------------------------------------------------- songs and tasks
LIBRARY_ALL = """lib, page = [], 0
while True:
    batch = apis.spotify.show_song_library(access_token=spotify_tok, page_index=page)
    if not batch:
        break
    lib += batch
    page += 1"""
SONG = {t: (i, names) for i, (t, names) in enumerate(W.SONGS)}


def _song_targets(kind: str, p: Any) -> list[str]:
    if kind == "byartist":
        return [t for t in W.LIBRARY if p in SONG[t][1]]
    if kind == "inplaylist":
        return list(dict(W.PLAYLISTS)[p])
    if kind == "longer":
        return [t for t in W.LIBRARY if 180 + 7 * SONG[t][0] > p]
    raise ValueError(kind)


def _song_code(kind: str, p: Any, wrong: bool) -> str:
    lib = LIBRARY_ALL if not wrong else "lib = apis.spotify.show_song_library(access_token=spotify_tok)"
    if kind == "byartist":
        return lib + f"\nsongs = [s['song_id'] for s in lib if any(a['name'] == {p!r} for a in s['artists'])]"
    if kind == "longer":
        op = ">=" if wrong else ">"
        return LIBRARY_ALL + f"\nsongs = [s['song_id'] for s in lib if s['duration'] {op} {p}]"
    if kind == "inplaylist":
        mine = ("[q for q in apis.spotify.show_playlist_library(access_token=spotify_tok) if q['title'] == "
                f"{p!r}]" if not wrong else
                f"[q for q in apis.spotify.search_playlists(query={p!r}) if q['title'] == {p!r}][-1:]")
        return f"playlist = {mine}[0]\nsongs = list(playlist['song_ids'])"
    raise ValueError(kind)


SONG_SELECTORS = {
    "byartist": (("The Midnight Owls", "Solar Echo", "Paper Lanterns"),
                 lambda p: f"the songs in my Spotify song library by {p}"),
    "inplaylist": (("Road Trip", "Chill Vibes", "Workout"), lambda p: f"the songs in my Spotify playlist \"{p}\""),
    # thresholds equal to a song's duration, so "at least" (the slip) differs from "longer than"
    "longer": ((229, 236, 243), lambda p: f"the songs in my Spotify song library longer than {p} seconds"),
}
PLAYLIST_TITLES = ["Evening Mix", "Favorites", "Sunday Morning", "Focus", "Road Songs", "Keepers"]


def _song_action(action: str, kind: str, p: Any, rng: random.Random) -> dict[str, Any]:
    what = SONG_SELECTORS[kind][1](p)
    targets = _song_targets(kind, p)
    if action == "like":
        code = ("liked, page = set(), 0\nwhile True:\n    batch = apis.spotify.show_liked_songs(access_token=spotify_tok, page_index=page)\n"
                "    if not batch:\n        break\n    liked |= {s['song_id'] for s in batch}\n    page += 1\n"
                "for sid in songs:\n    if sid not in liked:\n        apis.spotify.like_song(access_token=spotify_tok, song_id=sid)")
        return dict(text=f"Like all of {what} that I have not liked yet.", apps=["spotify"], ops=["read", "create"],
                    good=code, check=dict(kind="like", songs=targets))
    if action == "playlist":
        title = rng.choice(PLAYLIST_TITLES)
        code = (f"pid = apis.spotify.create_playlist(access_token=spotify_tok, title={title!r})['playlist_id']\n"
                "for sid in songs:\n    apis.spotify.add_song_to_playlist(access_token=spotify_tok, playlist_id=pid, song_id=sid)")
        return dict(text=f"Create a new private Spotify playlist titled \"{title}\" holding exactly {what}.",
                    apps=["spotify"], ops=["read", "create"], good=code,
                    check=dict(kind="playlist", songs=targets, title=title))
    if action == "count":
        return dict(text=f"How many songs are {what.removeprefix('the songs ')}? Answer with just the number.",
                    apps=["spotify"], ops=["read", "answer"], good="apis.supervisor.complete_task(answer=len(songs))",
                    check=dict(kind="answer", answer=len(targets)), completes=True)
    raise ValueError(action)


TODO_PROJECTS = ("Home", "Work", "Inbox")


def _todo_action(action: str, project: str, rng: random.Random) -> dict[str, Any]:
    open_titles = [t for t, done in W.TODO_TASKS[project] if not done]
    find = (f"pid = [p for p in apis.todoist.show_projects(access_token=todoist_tok) if p['name'] == {project!r}][0]['project_id']\n"
            "data = apis.todoist.show_tasks(access_token=todoist_tok, project_id=pid)\n"
            "tasks = data['no_section_tasks'] + [t for s in data['sections'] for t in s['tasks']]\n"
            "todo = [t for t in tasks if not t['is_completed']]")
    slip = find.replace("if not t['is_completed']", "")
    what = f"the open (not completed) tasks of my Todoist project \"{project}\""
    if action == "complete":
        code = "for t in todo:\n    apis.todoist.update_task(access_token=todoist_tok, task_id=t['task_id'], is_completed=True)"
        return dict(text=f"Mark all {what} as completed.", apps=["todoist"], ops=["read", "update"],
                    select_good=find, select_bad=find, good=code,
                    bad=code.replace("for t in todo:", "for t in todo[:1]:") if len(open_titles) > 1
                    else code.replace("is_completed=True", "is_completed=False"),
                    check=dict(kind="todocomplete", project=project, titles=open_titles))
    if action == "delete":
        code = "for t in todo:\n    apis.todoist.delete_task(access_token=todoist_tok, task_id=t['task_id'])"
        return dict(text=f"Delete {what}.", apps=["todoist"], ops=["read", "delete"], select_good=find,
                    select_bad=slip, good=code, check=dict(kind="tododelete", project=project, titles=open_titles))
    if action == "count":
        return dict(text=f"How many open (not completed) tasks are in my Todoist project \"{project}\"? "
                         "Answer with just the number.", apps=["todoist"], ops=["read", "answer"],
                    select_good=find, select_bad=slip, good="apis.supervisor.complete_task(answer=len(todo))",
                    check=dict(kind="answer", answer=len(open_titles)), completes=True)
    raise ValueError(action)


# ----------------------------------------------------------------------------- assembly
def _variant(scenario: str, k: int, split: str, spec: dict[str, Any], select_good: str, select_bad: str,
             login_apps: list[str], show: str) -> Variant:
    """Good: look up the docs and log in; find what the task is about and print it; act;
    complete. Wrong: the same with one plausible slip (in the finding or in the acting)."""
    select_good = spec.get("select_good", select_good)
    select_bad = spec.get("select_bad", select_bad)
    login = _login_cell(login_apps)
    docs = f"print(apis.api_docs.show_api_descriptions(app_name={login_apps[-1]!r})[:2])"
    bad_select = select_bad if spec.get("bad") is None else select_good
    bad_action = spec.get("bad") or spec["good"]
    good = [docs + "\n" + login, select_good + "\n" + show, spec["good"]]
    bad = [login, bad_select + "\n" + bad_action]
    if not spec.get("completes"):
        final = spec.get("final", COMPLETE)
        good.append(final)
        bad.append(final)
    return Variant(id=f"{scenario}_{k}", scenario=scenario, split=split, instruction=spec["text"],
                   apps=sorted(set(spec["apps"]) | set(spec.get("extra_apps", []))), operations=sorted(spec["ops"]),
                   good=good, bad=bad, check=spec["check"])


SHOW_PEOPLE = "print([{'contact_id': c['contact_id'], 'email': c['email']} for c in people])"
SHOW_SONGS = "print([{'song_id': s} for s in songs])"
SHOW_TASKS = "print([{'task_id': t['task_id'], 'title': t['title']} for t in todo])"


def _scenarios() -> list[tuple[str, Any]]:
    """(scenario id, builder(k, split) -> Variant) in a fixed order."""
    out: list[tuple[str, Any]] = []
    for sel in SELECTORS:
        for action in PERSON_ACTIONS:
            name = f"{action}{sel.name}"

            def build(k: int, split: str, sel: Selector = sel, action: str = action, name: str = name) -> Variant:
                rng = random.Random(f"{name}:{k}")
                p = sel.params[(k + random.Random(name).randrange(len(sel.params))) % len(sel.params)]
                spec = _person_action(action, sel, p, rng)
                source = ["phone"] + (["venmo"] if sel.needs_venmo else [])
                spec["extra_apps"] = source
                spec["text"] = spec["text"][0].upper() + spec["text"][1:]
                login_apps = sorted(set(spec["apps"]) | set(source))
                return _variant(name, k, split, spec, sel.code(p), sel.code(p, wrong=True), login_apps, SHOW_PEOPLE)

            out.append((name, build))
    for kind, (params, _) in SONG_SELECTORS.items():
        for action in ("like", "playlist", "count"):
            name = f"{action}{kind}"

            def build(k: int, split: str, kind: str = kind, action: str = action, name: str = name,
                      params: tuple = params) -> Variant:
                rng = random.Random(f"{name}:{k}")
                p = params[k % len(params)]
                spec = _song_action(action, kind, p, rng)
                spec["text"] = spec["text"][0].upper() + spec["text"][1:]
                return _variant(name, k, split, spec, _song_code(kind, p, False), _song_code(kind, p, True),
                                ["spotify"], SHOW_SONGS)

            out.append((name, build))
    for action in ("complete", "delete", "count"):
        name = f"todo{action}"

        def build(k: int, split: str, action: str = action, name: str = name) -> Variant:
            project = TODO_PROJECTS[k % len(TODO_PROJECTS)]
            spec = _todo_action(action, project, random.Random(f"{name}:{k}"))
            return _variant(name, k, split, spec, "", "", ["todoist"], SHOW_TASKS)

        out.append((name, build))
    return out


def build_variants() -> list[Variant]:
    """Every variant of every scenario (before AppWorld's evaluator has checked them)."""
    variants = []
    for position, (name, build) in enumerate(_scenarios()):
        split = "dev" if position % DEV_EVERY == DEV_EVERY - 1 else "train"
        variants += [build(k, split) for k in range(VARIANTS)]
    return variants
