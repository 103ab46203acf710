"""AppWorld's transition facts and task binding (the fields operators read).

Facts about API calls come from what executed: AppWorld's own request tracker (every
request its apps served during the step, in order). The few facts only the code can give
(syntax, loops written, call sites) are prefixed ``code_`` and say so.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from rubricgym import Facts, TaskBinding

CallKind = Literal["read", "write", "auth", "answer"]


class ExecutedCall(BaseModel):
    """One request AppWorld's apps served during the step (from its request tracker)."""

    model_config = ConfigDict(extra="forbid")

    app: str
    api: str
    method: str = Field(description="HTTP method of the API (AppWorld's API spec): GET, POST, ...")
    kind: CallKind = Field(description="read (GET), write (POST/PUT/PATCH/DELETE), auth (login/logout), "
                                       "answer (supervisor.complete_task)")
    arguments: dict[str, str] = Field(default_factory=dict,
                                      description="argument reprs; passwords, tokens and codes redacted")
    status: int | None = Field(None, description="HTTP status the app answered (None: no answer)")
    success: bool = False
    response_bytes: int = 0
    page_index: int | None = None


class CodeCallSite(BaseModel):
    """A static ``apis.<app>.<api>(...)`` call site in the code (it may or may not have run)."""

    model_config = ConfigDict(extra="forbid")

    app: str
    api: str
    arguments: dict[str, str] = Field(default_factory=dict, description="literal repr, or <expr:...> when computed")
    in_loop: bool = False


class AppWorldFacts(Facts):
    """What one executed code block did: AppWorld's request log, its output, and (``code_*``)
    the shape of the code."""

    benchmark: ClassVar[str] = "AppWorld"

    # -- executed: AppWorld's request tracker ----------------------------------------------
    executed_calls: list[ExecutedCall] = Field(default_factory=list, description="requests served, in order")
    num_executed_calls: int = 0
    call_counts: dict[str, int] = Field(default_factory=dict, description="'app.api' -> requests served")
    apps_called: list[str] = Field(default_factory=list,
                                   description="apps that served a request (not supervisor/api_docs)")
    read_api_called: bool = Field(False, description="an app served a successful read (GET) request")
    reads: list[str] = Field(default_factory=list, description="'app.api' of successful reads")
    write_attempted: bool = Field(False, description="a write request reached an app")
    mutating_apis: list[str] = Field(default_factory=list, description="'app.api' of writes that succeeded")
    failed_writes: list[str] = Field(default_factory=list, description="'app.api' of writes an app refused")
    state_mutated: bool = Field(False, description="at least one write succeeded (even if the code failed later)")
    api_docs_consulted: bool = Field(False, description="api_docs served a request")
    login_apps: list[str] = Field(default_factory=list, description="apps whose login succeeded in this step")
    authenticated_apps: list[str] = Field(default_factory=list, description="apps logged into so far")
    passwords_fetched: bool = Field(False, description="supervisor.show_account_passwords served")
    uses_access_token: bool = Field(False, description="a request carried an access token")
    paginated_apis: list[str] = Field(default_factory=list, description="'app.api' read with a page_index")
    pagination_advanced: bool = Field(
        False, description="a paginated read reached a page index beyond the highest seen for that API")
    complete_task_called: bool = Field(False, description="supervisor.complete_task served successfully")
    answer_given: bool = Field(False, description="complete_task was served with a non-empty answer")
    api_error: bool = Field(False, description="an app answered with an error status")
    api_error_codes: list[int] = Field(default_factory=list)
    api_error_messages: list[str] = Field(default_factory=list)
    # -- AppWorld's output and state -------------------------------------------------------
    execution_failed: bool = Field(False, description="AppWorld reported 'Execution failed'")
    exception_type: str | None = None
    timed_out: bool = False
    resource_limit: str | None = Field(None, description="'cpu' or 'memory' when the step hit a server cap")
    task_completed: bool = Field(False, description="AppWorld reports the task marked complete")
    printed_output: bool = Field(False, description="the code printed something")
    output_chars: int = 0
    emails_seen: list[str] = Field(default_factory=list)
    secret_in_output: bool = Field(False, description="output printed a password, access token or card number")
    secret_kinds: list[str] = Field(default_factory=list)
    # -- static: the code as written (execution cannot show these) -------------------------
    syntax_error: bool = False
    code_call_sites: list[CodeCallSite] = Field(default_factory=list,
                                                description="apis.<app>.<api>(...) written in the code (static)")
    code_has_loop: bool = Field(False, description="the code contains a loop or comprehension (static)")
    code_imports: list[str] = Field(default_factory=list, description="modules imported (static)")
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
