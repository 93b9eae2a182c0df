"""Read template.yaml into plain dicts and describe what the local stack needs from it.

CloudFormation short tags (`!Ref X`, `!GetAtt A.B`, `!Sub ...`) become their long forms
(`{"Ref": "X"}`, `{"Fn::GetAtt": ["A", "B"]}`, `{"Fn::Sub": ...}`), so every consumer sees the
same JSON shape CloudFormation itself works with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cfnlint.decode import cfn_yaml

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_PATH = ROOT / "template.yaml"

SERVERLESS_FUNCTION = "AWS::Serverless::Function"
SERVERLESS_LAYER = "AWS::Serverless::LayerVersion"


# --------------------------------------------------------------------------- YAML loading
def _plain(value: Any) -> Any:
    """cfn-lint's nodes (dict, list and str subclasses that remember their line) as plain values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def load_yaml(text: str) -> dict[str, Any]:
    """A CloudFormation template as CloudFormation reads it, by cfn-lint's decoder (the one YAML
    loader of the local stack and the tests): short tags in their long forms, a duplicate key an
    error."""
    data = _plain(cfn_yaml.loads(text))
    if not isinstance(data, dict):
        raise ValueError("a template must be a YAML mapping")
    return data


# --------------------------------------------------------------------------- descriptions
@dataclass(frozen=True)
class HttpRoute:
    """One HttpApi event: `POST /api/agents/{agentId}`."""

    function_id: str
    event_name: str
    method: str  # upper case, or ANY
    path: str  # route template, e.g. /api/agents/{agentId}, or $default
    auth_none: bool

    @property
    def route_key(self) -> str:
        return "$default" if self.path == "$default" else f"{self.method} {self.path}"


@dataclass(frozen=True)
class SqsSource:
    """One SQS event source mapping of a function."""

    function_id: str
    event_name: str
    queue_id: str  # logical id of the AWS::SQS::Queue
    batch_size: int
    report_failures: bool  # FunctionResponseTypes contains ReportBatchItemFailures


@dataclass(frozen=True)
class RuleSchedule:
    """A function's `Schedule` event: an EventBridge rule invoking it with a fixed Input."""

    function_id: str
    event_name: str
    expression: str  # rate(...) or cron(...)
    input: str | None


@dataclass(frozen=True)
class FunctionSpec:
    logical_id: str
    code_uri: str
    handler: str  # "<module>.<attribute>", e.g. app.lambda_handler
    timeout: int
    memory_size: int
    environment: dict[str, Any]  # Globals merged with the function's own, values unresolved
    routes: tuple[HttpRoute, ...] = ()
    sqs: tuple[SqsSource, ...] = ()
    on_failure_queue: str | None = None  # the queue of EventInvokeConfig's OnFailure destination (Type SQS)
    rules: tuple[RuleSchedule, ...] = ()  # Schedule events (EventBridge rules), fired by local.schedules

    @property
    def short_name(self) -> str:
        """ApiFunction -> api (used for file names and log lines)."""
        name = self.logical_id.removesuffix("Function")
        return (name or self.logical_id).lower()


@dataclass
class Template:
    data: dict[str, Any]
    path: Path | None = None
    _functions: list[FunctionSpec] | None = field(default=None, repr=False)

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.data.get("Resources", {})

    @property
    def parameters(self) -> dict[str, dict[str, Any]]:
        return self.data.get("Parameters", {})

    @property
    def conditions(self) -> dict[str, Any]:
        return self.data.get("Conditions", {})

    @property
    def function_globals(self) -> dict[str, Any]:
        return self.data.get("Globals", {}).get("Function", {})

    def parameter_defaults(self) -> dict[str, Any]:
        """Parameter values as a deploy with no overrides would see them (lists split)."""
        values: dict[str, Any] = {}
        for name, spec in self.parameters.items():
            default = spec.get("Default")
            if default is None:
                continue
            if spec.get("Type") == "CommaDelimitedList":
                values[name] = [item.strip() for item in str(default).split(",")]
            else:
                values[name] = str(default)
        return values

    def resources_of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {lid: res for lid, res in self.resources.items() if res.get("Type") == resource_type}

    def tables(self) -> dict[str, dict[str, Any]]:
        return self.resources_of_type("AWS::DynamoDB::Table")

    def buckets(self) -> dict[str, dict[str, Any]]:
        return self.resources_of_type("AWS::S3::Bucket")

    def queues(self) -> dict[str, dict[str, Any]]:
        return self.resources_of_type("AWS::SQS::Queue")

    def functions(self) -> list[FunctionSpec]:
        """The stack's functions at run time: every function but the deploy helpers."""
        if self._functions is None:
            helpers = self.deploy_helpers()
            self._functions = [
                self._function(lid, res) for lid, res in self.resources_of_type(SERVERLESS_FUNCTION).items() if lid not in helpers
            ]
        return self._functions

    def deploy_helpers(self) -> set[str]:
        """Functions that back custom resources (CloudFormation calls them while it deploys, e.g.
        ConsoleLogin): nothing of the running stack invokes them, so the local stack has no use
        for them (it creates its resources itself)."""
        helpers = set()
        for res in self.resources.values():
            kind = str(res.get("Type", ""))
            if kind.startswith("Custom::") or kind == "AWS::CloudFormation::CustomResource":
                token = (res.get("Properties") or {}).get("ServiceToken")
                if isinstance(token, dict) and "Fn::GetAtt" in token:
                    target = token["Fn::GetAtt"]
                    helpers.add(target[0] if isinstance(target, list) else str(target).split(".")[0])
        return helpers

    def function(self, logical_id: str) -> FunctionSpec:
        for spec in self.functions():
            if spec.logical_id == logical_id:
                return spec
        raise KeyError(f"no function {logical_id} in the template")

    def routes(self) -> list[HttpRoute]:
        return [route for spec in self.functions() for route in spec.routes]

    def sqs_sources(self) -> list[SqsSource]:
        return [source for spec in self.functions() for source in spec.sqs]

    def layer_dirs(self) -> list[str]:
        """ContentUri of every layer (relative to the template), e.g. layers/core/."""
        return [str(res["Properties"]["ContentUri"]) for res in self.resources_of_type(SERVERLESS_LAYER).values()]

    def _function(self, logical_id: str, resource: dict[str, Any]) -> FunctionSpec:
        props = {**self.function_globals, **resource.get("Properties", {})}
        env = dict(self.function_globals.get("Environment", {}).get("Variables", {}))
        env.update(resource.get("Properties", {}).get("Environment", {}).get("Variables", {}))
        code_uri, handler = props.get("CodeUri"), props.get("Handler")
        if not isinstance(code_uri, str) or not isinstance(handler, str):
            raise ValueError(f"{logical_id}: CodeUri and Handler must be plain strings locally")
        routes: list[HttpRoute] = []
        sources: list[SqsSource] = []
        rules: list[RuleSchedule] = []
        for name, event in (resource.get("Properties", {}).get("Events") or {}).items():
            kind, ev = event.get("Type"), event.get("Properties") or {}
            if kind == "HttpApi":
                auth = ev.get("Auth") or {}
                routes.append(
                    HttpRoute(
                        function_id=logical_id,
                        event_name=name,
                        method=str(ev.get("Method", "ANY")).upper(),
                        path=str(ev.get("Path", "$default")),
                        auth_none=auth.get("Authorizer") == "NONE",
                    )
                )
            elif kind == "SQS":
                sources.append(
                    SqsSource(
                        function_id=logical_id,
                        event_name=name,
                        queue_id=_logical_id_of(ev.get("Queue"), f"{logical_id}.{name}.Queue"),
                        batch_size=int(ev.get("BatchSize", 10)),
                        report_failures="ReportBatchItemFailures" in (ev.get("FunctionResponseTypes") or []),
                    )
                )
            elif kind == "Schedule":
                rules.append(
                    RuleSchedule(
                        function_id=logical_id,
                        event_name=name,
                        expression=str(ev.get("Schedule", "")),
                        input=ev.get("Input") if isinstance(ev.get("Input"), str) else None,
                    )
                )
            # Other event types (ScheduleV2...) are served by their own local emulation when added.
        on_failure = ((props.get("EventInvokeConfig") or {}).get("DestinationConfig") or {}).get("OnFailure") or {}
        on_failure_queue = (
            _logical_id_of(on_failure.get("Destination"), f"{logical_id}.EventInvokeConfig.DestinationConfig.OnFailure")
            if on_failure.get("Type") == "SQS"
            else None
        )
        return FunctionSpec(
            logical_id=logical_id,
            code_uri=code_uri,
            handler=handler,
            timeout=int(props.get("Timeout", 3)),
            memory_size=int(props.get("MemorySize", 128)),
            environment=env,
            routes=tuple(routes),
            sqs=tuple(sources),
            rules=tuple(rules),
            on_failure_queue=on_failure_queue,
        )


def _logical_id_of(value: Any, where: str) -> str:
    """The resource a `!GetAtt X.Arn` or `!Ref X` points at."""
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
        if "Ref" in value:
            return str(value["Ref"])
    raise ValueError(f"{where}: expected !GetAtt <Queue>.Arn or !Ref <Queue>, got {value!r}")


def load_template(path: str | Path = TEMPLATE_PATH) -> Template:
    path = Path(path)
    return Template(data=load_yaml(path.read_text(encoding="utf-8")), path=path)
