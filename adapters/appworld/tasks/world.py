"""The deterministic world every offline task starts from (runs in AppWorld's venv).

One small cast of people with accounts on eight apps; sizes are chosen so that listing
endpoints need pagination (AppWorld's default page size is 5). Returns the row ids the
ground truth needs. Built once per generation; every task starts from a copy of it.
Plain data at module level (no AppWorld import) so ``scenarios.py`` can compute expected
results from it in any interpreter.
"""

from __future__ import annotations

from typing import Any

SUPERVISOR = dict(first_name="Ada", last_name="Lovelace", email="ada.lovelace@gmail.com", phone_number="5551234567")
PEOPLE = {  # key -> (first, last, email, phone)
    "grace": ("Grace", "Hopper", "grace.hopper@gmail.com", "5552220001"),
    "alan": ("Alan", "Turing", "alan.turing@gmail.com", "5552220002"),
    "ruth": ("Ruth", "Lovelace", "ruth.lovelace@gmail.com", "5552220003"),
    "kathy": ("Katherine", "Johnson", "kathy.johnson@gmail.com", "5552220004"),
    "edsger": ("Edsger", "Dijkstra", "edsger.dijkstra@gmail.com", "5552220005"),
    "barbara": ("Barbara", "Liskov", "barbara.liskov@gmail.com", "5552220006"),
    "john": ("John", "Backus", "john.backus@gmail.com", "5552220007"),
    "frances": ("Frances", "Allen", "frances.allen@gmail.com", "5552220008"),
}
# The supervisor's passwords (apis.supervisor.show_account_passwords()); >= 5 characters.
PASSWORDS = {
    "venmo": "Vm!8pass", "spotify": "Sp#5tune", "todoist": "Td$9list", "file_system": "Fs%3disk",
    "phone": "Ph^7call", "simple_note": "Sn&2note", "gmail": "Gm*4mail", "amazon": "Am(6shop",
    "splitwise": "Sw)1split",
}
OTHER_PASSWORD = "Other#123"

ALAN_TO_ADA = [12.5, 30.0, 7.25, 45.0, 18.0, 22.75, 9.5, 60.0]
# Venmo transfers: (sender, receiver, amount, day of April 2023, description).
TRANSFERS = (
    [("alan", "ada", a, 1 + i, f"alan payback #{i + 1}") for i, a in enumerate(ALAN_TO_ADA)]
    + [("ada", "alan", 11.0, 15, "ada to alan #1"), ("ada", "alan", 25.0, 16, "ada to alan #2"),
       ("grace", "ada", 14.0, 20, "grace #1"), ("grace", "ada", 33.0, 21, "grace #2"), ("grace", "ada", 5.0, 22, "grace #3"),
       ("kathy", "ada", 40.0, 10, "concert"), ("kathy", "ada", 13.0, 25, "snacks"),
       ("barbara", "ada", 8.5, 12, "coffee"), ("barbara", "ada", 27.0, 27, "books"),
       ("john", "ada", 75.0, 28, "rent share"), ("ada", "ruth", 30.0, 18, "flowers"),
       ("ada", "frances", 16.0, 26, "lunch")]
)
ARTISTS = [("The Midnight Owls", "indie"), ("Solar Echo", "electronic"), ("Velvet Static", "rock"),
           ("Paper Lanterns", "folk"), ("Iron Meadow", "metal")]
SONGS = [
    ("Moonlit Alley", ["The Midnight Owls"]), ("Neon Rain", ["Solar Echo"]),
    ("Hollow Pines", ["The Midnight Owls"]), ("Static Hearts", ["Velvet Static"]),
    ("Lantern Light", ["Paper Lanterns"]), ("Owl Song", ["The Midnight Owls"]),
    ("Rusty Gates", ["Iron Meadow"]), ("Night Shift", ["The Midnight Owls", "Solar Echo"]),
    ("Paper Boats", ["Paper Lanterns"]), ("Feathered Dreams", ["The Midnight Owls"]),
    ("Electric Tide", ["Solar Echo"]), ("Quiet Wings", ["The Midnight Owls"]),
    ("Iron Bloom", ["Iron Meadow"]), ("Velvet Road", ["Velvet Static"]),
    ("Slow Ember", ["Paper Lanterns", "Velvet Static"]), ("Open Sky", ["Solar Echo"]),
]
LIBRARY = ["Moonlit Alley", "Neon Rain", "Static Hearts", "Hollow Pines", "Lantern Light", "Rusty Gates",
           "Owl Song", "Paper Boats", "Night Shift", "Electric Tide", "Feathered Dreams", "Quiet Wings"]
LIKED = ["Owl Song", "Neon Rain"]
PLAYLISTS = [("Road Trip", ["Open Sky", "Rusty Gates", "Velvet Road"]),
             ("Chill Vibes", ["Lantern Light", "Paper Boats", "Electric Tide", "Slow Ember", "Open Sky",
                              "Quiet Wings", "Neon Rain"]),
             ("Workout", ["Iron Bloom", "Static Hearts"])]
TODO_TASKS = {
    "Inbox": [("Call the plumber", False), ("Buy stamps", True)],
    "Home": [("Water the plants", False), ("Fix the fence", True), ("Clean the garage", False)],
    "Work": [("Write quarterly report", False), ("Review pull requests", True), ("Prepare slides", False),
             ("Email the client", False), ("Book meeting room", True), ("Update roadmap", False),
             ("Plan team offsite", False)],
}
ERRANDS = ["Pick up dry cleaning", "Return library books", "Buy a birthday card", "Renew passport"]
CONTACTS = [("ruth", ["sister", "family"]), ("grace", ["friend", "coworker"]), ("alan", ["coworker"]),
            ("kathy", ["friend"]), ("barbara", ["coworker"]), ("john", ["friend"]), ("frances", ["cousin", "family"])]
NOTE_IDEAS = "analytical engine v2"


def build_world(mc: Any, instruction: str, DateTime: Any) -> dict[str, Any]:
    """Fill an in-memory ``ModelCollection`` with the world; return the ids ground truth needs."""
    ids: dict[str, Any] = {}
    everyone = {"ada": tuple(SUPERVISOR.values()), **PEOPLE}

    def pw(key: str, app: str) -> str:
        return PASSWORDS[app] if key == "ada" else OTHER_PASSWORD

    main_user = mc.admin.MainUser.create_save(**SUPERVISOR, birthday="1990-12-10", sex="female")
    ids["main_user"] = main_user.id
    for fn, ln, em, ph in PEOPLE.values():
        mc.admin.MainUser.create_save(first_name=fn, last_name=ln, email=em, phone_number=ph,
                                      birthday="1988-03-03", sex=None)
    sup = mc.supervisor.Supervisor.create_save(**SUPERVISOR, birthday="1990-12-10", sex="female")
    # Task.answer keeps its default (not given): otherwise a do-nothing agent passes answer checks.
    mc.supervisor.Task.create_save(supervisor_id=sup.id, instruction=instruction)
    for app, password in PASSWORDS.items():
        mc.supervisor.AccountPassword.create_save(supervisor_id=sup.id, account_name=app, password=password)

    # venmo
    vu = {k: mc.venmo.User.create_save(first_name=fn, last_name=ln, email=em, password=pw(k, "venmo"),
                                       verified=True, venmo_balance=500.0 if k == "ada" else 200.0)
          for k, (fn, ln, em, _) in everyone.items()}
    for key in PEOPLE:
        mc.venmo.Friendship.create_save(user_id=vu["ada"].id, friend_id=vu[key].id)
        mc.venmo.Friendship.create_save(user_id=vu[key].id, friend_id=vu["ada"].id)
    for sender, receiver, amount, day, description in TRANSFERS:
        when = DateTime(2023, 4, day, 10, 0, 0)
        mc.venmo.Transaction.create_save(sender_id=vu[sender].id, receiver_id=vu[receiver].id, amount=amount,
                                         description=description, created_at=when, updated_at=when)
    ids["venmo"] = {k: v.id for k, v in vu.items()}

    # spotify
    su = {k: mc.spotify.User.create_save(first_name=fn, last_name=ln, email=em, password=pw(k, "spotify"),
                                         verified=True) for k, (fn, ln, em, _) in everyone.items()}
    artists = {name: mc.spotify.Artist.create_save(name=name, genre=genre) for name, genre in ARTISTS}
    songs = {}
    for i, (title, names) in enumerate(SONGS):
        songs[title] = mc.spotify.Song.create_save(
            title=title, artist_ids=[artists[a].id for a in names], album_id=None, duration=180 + 7 * i,
            release_date=DateTime(2020, 1 + i % 12, 1), genre=artists[names[0]].genre)
    for title in LIBRARY:
        mc.spotify.UserLibrarySong.create_save(user_id=su["ada"].id, song_id=songs[title].id)
    for title in LIKED:
        mc.spotify.SongLike.create_save(user_id=su["ada"].id, song_id=songs[title].id)
    mc.spotify.SongLike.create_save(user_id=su["grace"].id, song_id=songs["Moonlit Alley"].id)
    playlists = {}
    for title, members in PLAYLISTS:
        playlists[title] = mc.spotify.Playlist.create_save(title=title, user_id=su["ada"].id, is_public=False)
        for t in members:
            mc.spotify.PlaylistSong.create_save(playlist_id=playlists[title].id, song_id=songs[t].id)
    decoy = mc.spotify.Playlist.create_save(title="Road Trip", user_id=su["grace"].id, is_public=True)
    mc.spotify.PlaylistSong.create_save(playlist_id=decoy.id, song_id=songs["Owl Song"].id)
    mc.spotify.UserArtistFollowing.create_save(user_id=su["ada"].id, artist_id=artists["Solar Echo"].id)
    ids["spotify"] = {
        "user": su["ada"].id,
        "song": {k: v.id for k, v in songs.items()},
        "artist": {k: v.id for k, v in artists.items()},
        "playlist": {k: v.id for k, v in playlists.items()},
        "following": [artists["Solar Echo"].id],
    }

    # todoist
    tu = {k: mc.todoist.User.create_save(first_name=fn, last_name=ln, email=em, password=pw(k, "todoist"),
                                         verified=True) for k, (fn, ln, em, _) in everyone.items()}
    projects = {}
    for name, is_inbox in [("Inbox", True), ("Home", False), ("Work", False)]:
        projects[name] = mc.todoist.Project.create_save(user_id=tu["ada"].id, name=name, is_inbox=is_inbox)
        mc.todoist.ProjectCollaboratorLink.create_save(project_id=projects[name].id, user_id=tu["ada"].id)
    grace_work = mc.todoist.Project.create_save(user_id=tu["grace"].id, name="Work", is_inbox=False)
    mc.todoist.ProjectCollaboratorLink.create_save(project_id=grace_work.id, user_id=tu["grace"].id)
    todo = {}
    for pname, specs in TODO_TASKS.items():
        for idx, (title, done) in enumerate(specs):
            todo[title] = mc.todoist.Task.create_save(project_id=projects[pname].id, user_id=tu["ada"].id,
                                                      title=title, description="", priority="medium",
                                                      is_completed=done, order_index=idx).id
    mc.todoist.Task.create_save(project_id=grace_work.id, user_id=tu["grace"].id, title="Grace's work item",
                                priority="low", is_completed=False, order_index=0)
    ids["todoist"] = {"user": tu["ada"].id, "project": {k: v.id for k, v in projects.items()}, "task": todo}

    # file_system
    fu = {k: mc.file_system.User.create_save(first_name=fn, last_name=ln, email=em, password=pw(k, "file_system"),
                                             verified=True) for k, (fn, ln, em, _) in everyone.items()}
    for key, user in fu.items():
        home = user.home_directory_path
        dirs = ["/", "/home/", home, home + "documents/", home + "notes/"] if key == "ada" else [home]
        for d in dirs:
            mc.file_system.Directory.create_save(path=d, user_id=user.id)
    home = fu["ada"].home_directory_path
    mc.file_system.File.create_save(path=home + "notes/errands.txt", user_id=fu["ada"].id,
                                    content="\n".join(ERRANDS) + "\n")
    mc.file_system.File.create_save(path=home + "documents/resume.txt", user_id=fu["ada"].id,
                                    content="Ada Lovelace - Analyst")
    ids["file_system"] = {"user": fu["ada"].id, "home": home}

    # phone (logs in by phone number)
    pu = {k: mc.phone.User.create_save(first_name=fn, last_name=ln, phone_number=ph, password=pw(k, "phone"))
          for k, (fn, ln, _, ph) in everyone.items()}
    for key, relationships in CONTACTS:
        fn, ln, em, ph = everyone[key]
        mc.phone.Contact.create_save(user_id=pu["ada"].id, first_name=fn, last_name=ln, email=em,
                                     phone_number=ph, relationships=relationships)
    ids["phone"] = {k: v.id for k, v in pu.items()}

    # simple_note
    sn = mc.simple_note.User.create_save(first_name="Ada", last_name="Lovelace", email=SUPERVISOR["email"],
                                         password=PASSWORDS["simple_note"], verified=True)
    mc.simple_note.Note.create_save(user_id=sn.id, title="Ideas", content=NOTE_IDEAS)
    ids["simple_note"] = {"user": sn.id}

    # gmail and splitwise: accounts only (tasks write to them)
    gu = {k: mc.gmail.User.create_save(first_name=fn, last_name=ln, email=em, password=pw(k, "gmail"))
          for k, (fn, ln, em, _) in everyone.items()}
    ids["gmail"] = {k: v.id for k, v in gu.items()}
    wu = {k: mc.splitwise.User.create_save(first_name=fn, last_name=ln, email=em, password=pw(k, "splitwise"),
                                           verified=True) for k, (fn, ln, em, _) in everyone.items()}
    ids["splitwise"] = {k: v.id for k, v in wu.items()}
    return ids
