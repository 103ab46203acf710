"""Ground truth of the offline variants, in AppWorld's "minimal" format (runs in AppWorld's venv).

``ground_truth(check, ids)`` turns a variant's ``check`` (plain data from ``scenarios.py``:
people keys, amounts, titles) and the built world's row ids into the expected answer, the
private data and the checks ``AppWorld.evaluate()`` runs on the start/end databases.
"""

from __future__ import annotations

from typing import Any

try:
    from . import world as W
except ImportError:  # pragma: no cover - generation runs this file's folder on sys.path
    import world as W  # type: ignore[no-redef]

Check = tuple[str, str, str]  # (requirement, label, code run inside ``with test(requirement):``)


def _only(*models: str) -> Check:
    names = ", ".join(models)
    return (f"assert model changes match {names}.", "no_op_fail",
            f"test.case(models.changed_model_names(), \"==\", {set(models)!r})")


def _no_changes() -> Check:
    return ("assert no model changes.", "no_op_pass", 'test.case(models.changed_model_names(), "==", set())')


def _full(key: str) -> str:
    return f"{W.PEOPLE[key][0]} {W.PEOPLE[key][1]}"


def ground_truth(check: dict[str, Any], ids: dict[str, Any]) -> dict[str, Any]:
    kind = check["kind"]
    targets = check.get("targets", [])
    if kind == "answer":
        return dict(answer=check["answer"], private={}, tests=[_no_changes()])
    if kind == "pay":
        V = ids["venmo"]
        return dict(answer=None, private=dict(receiver_ids=sorted(V[k] for k in targets), sender_id=V["ada"],
                                              amount=check["amount"], note=check["note"]), tests=[
            _only("venmo.Transaction", "venmo.User", "venmo.Notification"),
            ("assert one transaction per person with private_data amount and note.", "no_op_fail",
             'added, updated, removed = models.changed_records("venmo.Transaction")\n'
             'test.case((len(updated), len(removed)), "==", (0, 0))\n'
             'test.case(list_of(added, "receiver_id"), "==", private_data.receiver_ids, ignore_order=True)\n'
             'test.case(set_of(added, "sender_id"), "==", {private_data.sender_id})\n'
             'for t in added:\n'
             '    test.case(t.amount, "==", private_data.amount, tolerance=0.001)\n'
             '    test.case(t.description, "==", private_data.note, normalize_text=True)'),
        ])
    if kind == "request":
        V = ids["venmo"]
        return dict(answer=None, private=dict(others=sorted(V[k] for k in targets), me=V["ada"],
                                              amount=check["amount"], note=check["note"]), tests=[
            ("assert no venmo.Transaction changed.", "no_op_pass",
             'test.case("venmo.Transaction" in models.changed_model_names(), "==", False)'),
            ("assert one payment request per person with private_data amount and note.", "no_op_fail",
             'added, updated, removed = models.changed_records("venmo.PaymentRequest")\n'
             'test.case((len(updated), len(removed)), "==", (0, 0))\n'
             'others = [r.receiver_id if r.sender_id == private_data.me else r.sender_id for r in added]\n'
             'test.case(others, "==", private_data.others, ignore_order=True)\n'
             'for r in added:\n'
             '    test.case(private_data.me in (r.sender_id, r.receiver_id), "==", True)\n'
             '    test.case(r.amount, "==", private_data.amount, tolerance=0.001)\n'
             '    test.case(r.description, "==", private_data.note, normalize_text=True)'),
        ])
    if kind == "text":
        P = ids["phone"]
        return dict(answer=None, private=dict(receiver_ids=sorted(P[k] for k in targets), sender_id=P["ada"],
                                              message=check["message"]), tests=[
            _only("phone.GlobalTextMessage", "phone.UserTextMessage"),
            ("assert one text per person from the main user with private_data.message.", "no_op_fail",
             'added, _, removed = models.changed_records("phone.GlobalTextMessage")\n'
             'test.case(len(removed), "==", 0)\n'
             'test.case(list_of(added, "receiver_id"), "==", private_data.receiver_ids, ignore_order=True)\n'
             'test.case(set_of(added, "sender_id"), "==", {private_data.sender_id})\n'
             'for m in added:\n'
             '    test.case(m.message, "==", private_data.message, normalize_text=True)'),
        ])
    if kind == "email":
        G = ids["gmail"]
        return dict(answer=None, private=dict(recipient_ids=sorted(G[k] for k in targets), sender_id=G["ada"],
                                              subject=check["subject"], body=check["body"]), tests=[
            ("assert emails were added and none removed.", "no_op_fail",
             'added, _, removed = models.changed_records("gmail.Email")\n'
             'test.case((len(added) > 0, len(removed)), "==", (True, 0))'),
            ("assert the added emails reach exactly private_data.recipient_ids with the subject and body.",
             "no_op_fail",
             'added, _, _ = models.changed_records("gmail.Email")\n'
             'test.case(sorted({r for e in added for r in e.recipient_ids}), "==", private_data.recipient_ids)\n'
             'for e in added:\n'
             '    test.case(e.sender_id, "==", private_data.sender_id)\n'
             '    test.case(e.subject, "==", private_data.subject, normalize_text=True)\n'
             '    test.case(e.body, "==", private_data.body, normalize_text=True)'),
        ])
    if kind == "note":
        return dict(answer=None, private=dict(title=check["title"], lines=sorted(_full(k) for k in targets)), tests=[
            _only("simple_note.Note"),
            ("assert one note titled private_data.title lists private_data.lines in order.", "no_op_fail",
             'added, updated, removed = models.changed_records("simple_note.Note")\n'
             'test.case((len(added), len(updated), len(removed)), "==", (1, 0, 0))\n'
             'test.case(added[0].title, "==", private_data.title, normalize_text=True)\n'
             'test.case([l.strip() for l in added[0].content.strip().splitlines()], "==", private_data.lines)'),
        ])
    if kind == "todo":
        T = ids["todoist"]
        return dict(answer=None, private=dict(project_id=T["project"][check["project"]],
                                              titles=[f"{check['verb']} {_full(k)}" for k in targets]), tests=[
            _only("todoist.Task"),
            ("assert added task titles match private_data.titles in the project; updates only reorder.",
             "no_op_fail",
             'added, updated, removed = models.changed_records("todoist.Task")\n'
             'test.case(len(removed), "==", 0)\n'
             'for u in updated:\n'
             '    test.case(models.changed_field_names("todoist.Task", u.id), "<=", {"order_index"})\n'
             'test.case(list_of(added, "title"), "==", private_data.titles, ignore_order=True, normalize_text=True)\n'
             'test.case(list_of(added, "project_id"), "all ==", private_data.project_id)'),
        ])
    if kind == "file":
        F = ids["file_system"]
        return dict(answer=None, private=dict(path=F["home"] + check["path"], user_id=F["user"],
                                              lines=sorted(W.PEOPLE[k][2] for k in targets)), tests=[
            ("assert model changes match file_system.File, ignoring file_system.Directory.", "no_op_fail",
             'test.case(models.changed_model_names(ignore=["file_system.Directory"]), "==", {"file_system.File"})'),
            ("assert exactly one file was added at private_data.path holding private_data.lines.", "no_op_fail",
             'added, updated, removed = models.changed_records("file_system.File")\n'
             'test.case((len(added), len(updated), len(removed)), "==", (1, 0, 0))\n'
             'f = added[0]\n'
             'test.case((f.path, f.user_id), "==", (private_data.path, private_data.user_id))\n'
             'test.case([l.strip() for l in f.content.strip().splitlines()], "==", private_data.lines)'),
        ])
    if kind == "group":
        Sw = ids["splitwise"]
        return dict(answer=None, private=dict(name=check["group"], me=Sw["ada"],
                                              members=sorted(Sw[k] for k in targets)), tests=[
            ("assert exactly one splitwise group named private_data.name was added.", "no_op_fail",
             'added, updated, removed = models.changed_records("splitwise.Group")\n'
             'test.case((len(added), len(removed)), "==", (1, 0))\n'
             'test.case(added[0].name, "==", private_data.name, normalize_text=True)'),
            ("assert the group's members are the main user and private_data.members.", "no_op_fail",
             'groups, _, _ = models.changed_records("splitwise.Group")\n'
             'added, _, _ = models.changed_records("splitwise.GroupMember")\n'
             'test.case(set_of(added, "group_id"), "==", {groups[0].id})\n'
             'test.case(sorted(set_of(added, "user_id") - {private_data.me}), "==", private_data.members)'),
        ])
    S = ids["spotify"]
    if kind == "like":
        already = {S["song"][t] for t in W.LIKED}
        songs = [S["song"][t] for t in check["songs"]]
        return dict(answer=None, private=dict(to_like=sorted(set(songs) - already), songs=songs, user_id=S["user"]),
                    tests=[
            ("assert only spotify.SongLike and spotify.Song changed.", "no_op_fail",
             'test.case(models.changed_model_names(), "<=", {"spotify.SongLike", "spotify.Song"})'),
            ("assert added likes are exactly private_data.to_like, by the user, none removed.", "no_op_fail",
             'added, _, removed = models.changed_records("spotify.SongLike")\n'
             'test.case(len(removed), "==", 0)\n'
             'test.case(list_of(added, "song_id"), "==", private_data.to_like, ignore_order=True)\n'
             'test.case(set_of(added, "user_id") <= {private_data.user_id}, "==", True)'),
        ])
    if kind == "playlist":
        return dict(answer=None, private=dict(title=check["title"], user_id=S["user"],
                                              song_ids=[S["song"][t] for t in check["songs"]]), tests=[
            _only("spotify.Playlist", "spotify.PlaylistSong"),
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
    T = ids["todoist"]
    project_ids = [T["task"][t] for t, _ in W.TODO_TASKS[check["project"]]]
    open_ids = [T["task"][t] for t in check["titles"]]
    if kind == "todocomplete":
        return dict(answer=None, private=dict(open_ids=open_ids, project_ids=project_ids), tests=[
            _only("todoist.Task"),
            ("assert only private_data.open_ids were updated, only in is_completed.", "no_op_fail",
             'added, updated, removed = models.changed_records("todoist.Task")\n'
             'test.case((len(added), len(removed)), "==", (0, 0))\n'
             'test.case(list_of(updated, "id"), "==", private_data.open_ids, ignore_order=True)\n'
             'for u in updated:\n'
             '    test.case(models.changed_field_names("todoist.Task", u.id), "==", {"is_completed"})'),
            ("assert every task of the project is completed in the end.", "no_op_fail",
             'tasks = models.end.todoist.Task.by_ids(private_data.project_ids)\n'
             'test.case([t.is_completed for t in tasks], "all ==", True)'),
        ])
    if kind == "tododelete":
        return dict(answer=None, private=dict(open_ids=open_ids), tests=[
            _only("todoist.Task"),
            ("assert exactly private_data.open_ids were removed and nothing added or updated.", "no_op_fail",
             'added, updated, removed = models.changed_records("todoist.Task")\n'
             'test.case((len(added), len(updated)), "==", (0, 0))\n'
             'test.case(list_of(removed, "id"), "==", private_data.open_ids, ignore_order=True)'),
        ])
    raise ValueError(f"unknown check kind {kind!r}")
