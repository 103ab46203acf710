"""Ground truth of the offline tasks, in AppWorld's "minimal" format (runs in AppWorld's venv).

Per task: the expected answer, private data (row ids from the built world) and the checks
``AppWorld.evaluate()`` runs on the start/end databases. Checks compare ``models.start`` and
``models.end`` with ``changed_model_names()`` / ``changed_records()``.
"""

from __future__ import annotations

from typing import Any

import world as W

Check = tuple[str, str, str]  # (requirement, label, code run inside ``with test(requirement):``)


def _added_only(model: str) -> Check:
    return (f"assert model changes match {model}.", "no_op_fail",
            f'test.case(models.changed_model_names(), "==", {{"{model}"}})')


def _one_file_added() -> list[Check]:
    """Exactly one file added, with private_data's path, content and owner (directories ignored,
    as the official evaluations do)."""
    return [
        ("assert model changes match file_system.File, ignoring file_system.Directory.", "no_op_fail",
         'test.case(models.changed_model_names(ignore=["file_system.Directory"]), "==", {"file_system.File"})'),
        ("assert exactly one file was added with private_data path, content and owner.", "no_op_fail",
         'added, updated, removed = models.changed_records("file_system.File")\n'
         'test.case((len(added), len(updated), len(removed)), "==", (1, 0, 0))\n'
         'f = added[0]\n'
         'test.case((f.path, f.user_id), "==", (private_data.path, private_data.user_id))\n'
         'test.case(f.content, "==", private_data.content, strip=True)'),
    ]


def _no_changes() -> Check:
    return ("assert no model changes.", "no_op_pass", 'test.case(models.changed_model_names(), "==", set())')


def _question(answer: Any) -> dict[str, Any]:
    return dict(answer=answer, private={}, tests=[_no_changes()])


def ground_truth(ids: dict[str, Any]) -> dict[str, dict[str, Any]]:
    V, S, T, F, P = ids["venmo"], ids["spotify"], ids["todoist"], ids["file_system"], ids["phone"]
    song_artists = {t: [S["artist"][a] for a in names] for t, names in W.SONGS}
    owl = S["artist"]["The Midnight Owls"]
    owl_library = [S["song"][t] for t in W.LIBRARY if owl in song_artists[t]]
    chill = dict(W.PLAYLISTS)["Chill Vibes"]
    to_follow = sorted({a for t in chill for a in song_artists[t]} - set(S["following"]))
    work = W.TODO_TASKS["Work"]
    gt: dict[str, dict[str, Any]] = {}

    gt["venmopay_1"] = dict(answer=None, private=dict(
        receiver_id=V["grace"], sender_id=V["ada"], amount=42.5, description="Dinner at Luigi's", start_balance=500.0),
        tests=[
            ("assert model changes match venmo.Transaction, venmo.User, venmo.Notification.", "no_op_fail",
             'test.case(models.changed_model_names(), "==", {"venmo.Transaction", "venmo.User", "venmo.Notification"})'),
            ("assert exactly one venmo.Transaction was added with the private_data fields.", "no_op_fail",
             'added, updated, removed = models.changed_records("venmo.Transaction")\n'
             'test.case((len(added), len(updated), len(removed)), "==", (1, 0, 0))\n'
             't = added[0]\n'
             'test.case((t.sender_id, t.receiver_id), "==", (private_data.sender_id, private_data.receiver_id))\n'
             'test.case(t.amount, "==", private_data.amount, tolerance=0.001)\n'
             'test.case(t.description, "==", private_data.description, normalize_text=True)'),
            ("assert the main user's venmo balance decreased by private_data.amount.", "no_op_fail",
             'user = models.end.venmo.User.find_from(main_user)\n'
             'test.case(user.venmo_balance, "==", private_data.start_balance - private_data.amount, tolerance=0.001)'),
        ])
    gt["venmoask_1"] = _question(round(sum(W.ALAN_TO_ADA), 2))
    gt["venmorequest_1"] = dict(answer=None, private=dict(
        sender_id=V["ada"], receiver_id=V["kathy"], amount=15.0, description="Movie tickets"),
        tests=[
            ("assert no venmo.Transaction changed.", "no_op_pass",
             'test.case("venmo.Transaction" in models.changed_model_names(), "==", False)'),
            ("assert exactly one venmo.PaymentRequest was added with the private_data fields.", "no_op_fail",
             'added, updated, removed = models.changed_records("venmo.PaymentRequest")\n'
             'test.case((len(added), len(updated), len(removed)), "==", (1, 0, 0))\n'
             'r = added[0]\n'
             'test.case({r.sender_id, r.receiver_id}, "==", {private_data.sender_id, private_data.receiver_id})\n'
             'test.case(r.amount, "==", private_data.amount, tolerance=0.001)\n'
             'test.case(r.description, "==", private_data.description, normalize_text=True)'),
        ])
    gt["venmosenders_1"] = _question(2)

    gt["todonew_1"] = dict(answer=None, private=dict(
        project_id=T["project"]["Home"], title="Buy printer ink", due_date="2023-05-20", priority="high"),
        tests=[
            _added_only("todoist.Task"),
            ("assert one todoist.Task was added with the private_data fields; updates only reorder.", "no_op_fail",
             'added, updated, removed = models.changed_records("todoist.Task")\n'
             'test.case((len(added), len(removed)), "==", (1, 0))\n'
             'for u in updated:\n'
             '    test.case(models.changed_field_names("todoist.Task", u.id), "<=", {"order_index"})\n'
             't = added[0]\n'
             'test.case(t.title, "==", private_data.title, normalize_text=True)\n'
             'test.case(t.project_id, "==", private_data.project_id)\n'
             'test.case(t.due_date is not None and t.due_date.strftime("%Y-%m-%d"), "==", private_data.due_date)\n'
             'test.case(t.priority, "==", private_data.priority)'),
        ])
    gt["todocomplete_1"] = dict(answer=None, private=dict(
        to_complete_ids=[T["task"][t] for t, done in work if not done], work_ids=[T["task"][t] for t, _ in work]),
        tests=[
            _added_only("todoist.Task"),
            ("assert only private_data.to_complete_ids were updated, only in is_completed.", "no_op_fail",
             'added, updated, removed = models.changed_records("todoist.Task")\n'
             'test.case((len(added), len(removed)), "==", (0, 0))\n'
             'test.case(list_of(updated, "id"), "==", private_data.to_complete_ids, ignore_order=True)\n'
             'for u in updated:\n'
             '    test.case(models.changed_field_names("todoist.Task", u.id), "==", {"is_completed"})'),
            ("assert every task of the project is completed in the end.", "no_op_fail",
             'tasks = models.end.todoist.Task.by_ids(private_data.work_ids)\n'
             'test.case([t.is_completed for t in tasks], "all ==", True)'),
        ])
    gt["todocount_1"] = _question(sum(1 for _, done in W.TODO_TASKS["Home"] if not done))
    gt["tododelete_1"] = dict(answer=None, private=dict(task_id=T["task"]["Call the plumber"]), tests=[
        _added_only("todoist.Task"),
        ("assert exactly private_data.task_id was removed and nothing added or updated.", "no_op_fail",
         'added, updated, removed = models.changed_records("todoist.Task")\n'
         'test.case((len(added), len(updated)), "==", (0, 0))\n'
         'test.case(list_of(removed, "id"), "==", [private_data.task_id])'),
    ])

    gt["spotifylike_1"] = dict(answer=None, private=dict(
        to_like=[s for s in owl_library if s not in [S["song"][t] for t in W.LIKED]], all_owl=owl_library,
        user_id=S["user"]),
        tests=[
            ("assert model changes match spotify.SongLike, spotify.Song.", "no_op_fail",
             'test.case(models.changed_model_names(), "==", {"spotify.SongLike", "spotify.Song"})'),
            ("assert added likes are exactly private_data.to_like, by the user, none removed.", "no_op_fail",
             'added, _, removed = models.changed_records("spotify.SongLike")\n'
             'test.case(len(removed), "==", 0)\n'
             'test.case(list_of(added, "song_id"), "==", private_data.to_like, ignore_order=True)\n'
             'test.case(set_of(added, "user_id"), "==", {private_data.user_id})'),
            ("assert every song in private_data.all_owl is liked in the end.", "no_op_fail",
             'liked = set_of(models.end.spotify.SongLike.find_all(user_id=private_data.user_id), "song_id")\n'
             'test.case(private_data.all_owl, "all in", liked)'),
        ])
    gt["spotifyplaylist_1"] = dict(answer=None, private=dict(
        playlist_id=S["playlist"]["Road Trip"], song_id=S["song"]["Neon Rain"]),
        tests=[
            _added_only("spotify.PlaylistSong"),
            ("assert exactly one spotify.PlaylistSong was added with private_data playlist_id and song_id.",
             "no_op_fail",
             'added, updated, removed = models.changed_records("spotify.PlaylistSong")\n'
             'test.case((len(added), len(updated), len(removed)), "==", (1, 0, 0))\n'
             'test.case((added[0].playlist_id, added[0].song_id), "==", (private_data.playlist_id, private_data.song_id))'),
        ])
    gt["spotifyfollow_1"] = dict(answer=None, private=dict(to_follow=to_follow), tests=[
        _added_only("spotify.UserArtistFollowing"),
        ("assert added followings are exactly private_data.to_follow, none removed.", "no_op_fail",
         'added, _, removed = models.changed_records("spotify.UserArtistFollowing")\n'
         'test.case(len(removed), "==", 0)\n'
         'test.case(list_of(added, "artist_id"), "==", private_data.to_follow, ignore_order=True)'),
    ])
    gt["spotifycount_1"] = _question(len(W.LIBRARY))
    gt["spotifynewlist_1"] = dict(answer=None, private=dict(title="Owl Favorites", song_ids=owl_library,
                                                            user_id=S["user"]),
        tests=[
            ("assert model changes match spotify.Playlist, spotify.PlaylistSong.", "no_op_fail",
             'test.case(models.changed_model_names(), "==", {"spotify.Playlist", "spotify.PlaylistSong"})'),
            ("assert one playlist titled private_data.title was added for the user.", "no_op_fail",
             'added, updated, removed = models.changed_records("spotify.Playlist")\n'
             'test.case((len(added), len(removed)), "==", (1, 0))\n'
             'test.case(added[0].title, "==", private_data.title, normalize_text=True)\n'
             'test.case(added[0].user_id, "==", private_data.user_id)'),
            ("assert the new playlist holds exactly private_data.song_ids.", "no_op_fail",
             'new, _, _ = models.changed_records("spotify.Playlist")\n'
             'added, _, removed = models.changed_records("spotify.PlaylistSong")\n'
             'test.case(len(removed), "==", 0)\n'
             'test.case(set_of(added, "playlist_id"), "==", {new[0].id})\n'
             'test.case(list_of(added, "song_id"), "==", private_data.song_ids, ignore_order=True)'),
        ])

    gt["fscreate_1"] = dict(answer=None, private=dict(
        path=F["home"] + "documents/shopping_list.txt", content="eggs, milk, bread", user_id=F["user"]),
        tests=_one_file_added())
    gt["fscount_1"] = _question(len(W.ERRANDS))
    gt["fstodo_1"] = dict(answer=None, private=dict(titles=W.ERRANDS, inbox_id=T["project"]["Inbox"]), tests=[
        _added_only("todoist.Task"),
        ("assert added task titles match private_data.titles, none removed.", "no_op_fail",
         'added, _, removed = models.changed_records("todoist.Task")\n'
         'test.case(len(removed), "==", 0)\n'
         'test.case(list_of(added, "title"), "==", private_data.titles, ignore_order=True, normalize_text=True)'),
        ("assert all added tasks are in the inbox project.", "no_op_fail",
         'added, _, _ = models.changed_records("todoist.Task")\n'
         'test.case(list_of(added, "project_id"), "all ==", private_data.inbox_id)'),
    ])
    gt["notefile_1"] = dict(answer=None, private=dict(
        path=F["home"] + "documents/ideas.txt", content=W.NOTE_IDEAS, user_id=F["user"]),
        tests=_one_file_added())

    gt["phonecontact_1"] = dict(answer=None, private=dict(
        first_name="Linus", last_name="Pauling", phone_number="5559876543", email="linus.pauling@gmail.com",
        relationships=["friend"], user_id=P["ada"]),
        tests=[
            _added_only("phone.Contact"),
            ("assert exactly one contact was added with the private_data fields.", "no_op_fail",
             'added, updated, removed = models.changed_records("phone.Contact")\n'
             'test.case((len(added), len(updated), len(removed)), "==", (1, 0, 0))\n'
             'c = added[0]\n'
             'test.case((c.first_name, c.last_name), "==", (private_data.first_name, private_data.last_name))\n'
             'test.case((c.phone_number, c.email, c.user_id), "==", (private_data.phone_number, private_data.email, private_data.user_id))\n'
             'test.case(c.relationships, "==", private_data.relationships, ignore_order=True, normalize_text=True)'),
        ])
    gt["phonetext_1"] = dict(answer=None, private=dict(
        sender_id=P["ada"], receiver_id=P["ruth"], message="Happy birthday! See you on Sunday."),
        tests=[
            ("assert model changes match phone.GlobalTextMessage, phone.UserTextMessage.", "no_op_fail",
             'test.case(models.changed_model_names(), "==", {"phone.GlobalTextMessage", "phone.UserTextMessage"})'),
            ("assert one text from private_data.sender_id to private_data.receiver_id with private_data.message.",
             "no_op_fail",
             'added, _, removed = models.changed_records("phone.GlobalTextMessage")\n'
             'test.case((len(added), len(removed)), "==", (1, 0))\n'
             'm = added[0]\n'
             'test.case((m.sender_id, m.receiver_id), "==", (private_data.sender_id, private_data.receiver_id))\n'
             'test.case(m.message, "==", private_data.message, normalize_text=True)'),
        ])
    gt["phoneask_1"] = _question(W.PEOPLE["alan"][3])
    gt["phonevenmo_1"] = dict(answer=None, private=dict(
        receiver_ids=sorted([V["grace"], V["alan"]]), amount=20.0, description="Team lunch", sender_id=V["ada"],
        start_balance=500.0),
        tests=[
            ("assert model changes match venmo.Transaction, venmo.User, venmo.Notification.", "no_op_fail",
             'test.case(models.changed_model_names(), "==", {"venmo.Transaction", "venmo.User", "venmo.Notification"})'),
            ("assert one transaction per coworker with private_data amount and description.", "no_op_fail",
             'added, updated, removed = models.changed_records("venmo.Transaction")\n'
             'test.case((len(updated), len(removed)), "==", (0, 0))\n'
             'test.case(list_of(added, "receiver_id"), "==", private_data.receiver_ids, ignore_order=True)\n'
             'test.case(set_of(added, "sender_id"), "==", {private_data.sender_id})\n'
             'test.case(list_of(added, "amount"), "all ==", private_data.amount)\n'
             'for t in added:\n'
             '    test.case(t.description, "==", private_data.description, normalize_text=True)'),
        ])
    gt["phonenote_1"] = dict(answer=None, private=dict(
        title="Friends", lines=sorted(W.PEOPLE[k][0] for k, rel in W.CONTACTS if "friend" in rel)),
        tests=[
            _added_only("simple_note.Note"),
            ("assert one note titled private_data.title lists private_data.lines in order.", "no_op_fail",
             'added, updated, removed = models.changed_records("simple_note.Note")\n'
             'test.case((len(added), len(updated), len(removed)), "==", (1, 0, 0))\n'
             'test.case(added[0].title, "==", private_data.title, normalize_text=True)\n'
             'test.case([l.strip() for l in added[0].content.strip().splitlines()], "==", private_data.lines)'),
        ])
    return gt
