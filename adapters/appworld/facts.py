"""AppWorld's transition facts and task binding (the fields operators read)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from rubricgym.adapter import TaskBinding
from rubricgym.contract import Facts


class ApiCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    app: str
    api: str
    arguments: dict[str, str] = Field(default_factory=dict, description="literal repr, or <expr:...> when computed")
    mutating: bool = False
    in_loop: bool = False


class AppWorldFacts(Facts):
    """What one executed code block did, from the code (ast) and AppWorld's output."""

    benchmark: ClassVar[str] = "AppWorld"

    api_calls: list[ApiCall] = Field(default_factory=list, description="apis.<app>.<api>(...) call sites in the code")
    apps_called: list[str] = Field(
        default_factory=list, description="apps whose APIs the code calls (not supervisor/api_docs)"
    )
    num_api_calls: int = 0
    read_api_called: bool = Field(False, description="a non-mutating app API (show/search/...) was called")
    mutating_apis: list[str] = Field(default_factory=list, description="'app.api' of state-changing calls in the code")
    mutating_api_called: bool = False
    state_mutated: bool = Field(False, description="a mutating call ran and execution did not fail")
    api_docs_consulted: bool = Field(False, description="apis.api_docs.* was called")
    syntax_error: bool = False
    execution_failed: bool = Field(False, description="AppWorld reported 'Execution failed'")
    exception_type: str | None = None
    timed_out: bool = False
    api_error: bool = Field(False, description="an app API answered with an error status")
    api_error_codes: list[int] = Field(default_factory=list)
    api_error_messages: list[str] = Field(default_factory=list)
    login_apps: list[str] = Field(default_factory=list, description="apps logged into by this step (succeeded)")
    authenticated_apps: list[str] = Field(default_factory=list, description="apps logged into so far")
    passwords_fetched: bool = Field(False, description="supervisor.show_account_passwords was called")
    uses_access_token: bool = False
    paginated_apis: list[str] = Field(default_factory=list, description="'app.api' called with page_index")
    pagination_advanced: bool = Field(
        False, description="page_index computed (e.g. in a loop) or beyond the highest literal seen for that API"
    )
    complete_task_called: bool = False
    answer_given: bool = Field(False, description="complete_task was called with an answer")
    task_completed: bool = Field(False, description="AppWorld reports the task marked complete")
    imports: list[str] = Field(default_factory=list)
    has_loop: bool = False
    printed_output: bool = Field(False, description="the code printed something")
    output_chars: int = 0
    emails_seen: list[str] = Field(default_factory=list)
    secret_in_output: bool = Field(False, description="output printed a password, access token or card number")
    secret_kinds: list[str] = Field(default_factory=list)
    code_lines: int = 0


class AppWorldBinding(TaskBinding):
    """Deterministic extraction from the instruction (plus the offline task's authored metadata)."""

    apps: list[str] = Field(default_factory=list, description="apps the task involves")
    people: list[str] = Field(default_factory=list, description="person names mentioned")
    emails: list[str] = Field(default_factory=list)
    quoted: list[str] = Field(default_factory=list, description="quoted strings (titles, messages, notes)")
    amounts: list[float] = Field(default_factory=list, description="money amounts mentioned")
    dates: list[str] = Field(default_factory=list)
    file_paths: list[str] = Field(default_factory=list)
    relationships: list[str] = Field(default_factory=list)
    required_operations: list[str] = Field(
        default_factory=list, description="operation types: read, create, update, delete, send, answer"
    )
    expects_answer: bool = False
    needs_all_items: bool = Field(False, description="'all'/'every'/'each'/'how many': complete data needed")
