"""Create the template's table, bucket, queues and schedule group with boto3 against the current endpoint.

Everything comes from the resources' own Properties in template.yaml (key schema, GSIs, TTL,
FIFO, redrive...), so the local stack and the tests cannot drift from what is deployed. The
endpoint is whatever boto3 would use: moto's `mock_aws` in tests, `AWS_ENDPOINT_URL` (the moto
server) in the local stack.

To emulate another resource type, write a creator `(ctx, logical_id, name, props) -> Physical`
and register it in `CREATORS`; creation order follows the references between resources.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3

from .template import Template

ACCOUNT_ID = "123456789012"  # moto's default account
LOCAL_MODEL_PROVIDER = "offline"
# Environment values that name cloud-only resources; locally they have a fixed value instead.
# The heartbeat ARN is what local/schedules.py maps back to HeartbeatFunction when a schedule fires;
# the scheduler role is only stored on the schedules (moto neither checks nor assumes it).
LOCAL_HEARTBEAT_FUNCTION_ARN = f"arn:aws:lambda:us-east-1:{ACCOUNT_ID}:function:engram-local-heartbeat-function"
LOCAL_SCHEDULER_ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/engram-local-scheduler-role"
LOCAL_STREAM_URL = "ws://127.0.0.1:3002"
LOCAL_ENV_OVERRIDES: dict[str, str] = {
    "ANTHROPIC_SECRET_ARN": "",
    "HEARTBEAT_FUNCTION_ARN": LOCAL_HEARTBEAT_FUNCTION_ARN,
    "SCHEDULER_ROLE_ARN": LOCAL_SCHEDULER_ROLE_ARN,
    # No user pool here: the local authorizer takes `dev-<user>` tokens, so the console asks for a
    # dev user name instead of sending people to a managed login.
    "CONSOLE_SIGN_IN": "dev",
    # MCP tool servers on this machine (the sample server, your own) are reachable locally.
    "TOOL_EGRESS": "local",
    "CONSOLE_LOGIN_URL": "",
    "CONSOLE_CLIENT_ID": "",
    # No issuer either: the authorizer function takes API keys only (`dev-<user>` never reaches it).
    "AUTH_ISSUER": "",
    "AUTH_AUDIENCE": "",
    # Nor client registration (RFC 7591): the loopback authorization server registers clients itself.
    "USER_POOL_ID": "",
    # The WebSocket API: the local stack serves it on its own port (local/sockets.py) and sets
    # the port it picked when it starts; this is `make dev`'s default.
    "STREAM_URL": LOCAL_STREAM_URL,
}


class Unresolvable(LookupError):
    """A template value that refers to something the local stack does not have."""


_NO_VALUE = object()  # AWS::NoValue: the enclosing key or list item disappears


@dataclass(frozen=True)
class Physical:
    """A created resource: what `!Ref` returns and what `!GetAtt` can read."""

    type: str
    ref: str
    attrs: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- intrinsic functions
_SUB_VAR = re.compile(r"\$\{([^}]*)\}")


class Resolver:
    """Evaluates CloudFormation intrinsics against parameter values and created resources."""

    def __init__(
        self,
        template: Template,
        physical: Mapping[str, Physical],
        *,
        region: str,
        parameters: Mapping[str, Any] | None = None,
        stack_name: str = "engram-local",
    ) -> None:
        self.template = template
        self.physical = physical
        self.parameters = {**template.parameter_defaults(), **(parameters or {})}
        self.pseudo = {
            "AWS::Region": region,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": stack_name,
            "AWS::StackId": f"arn:aws:cloudformation:{region}:{ACCOUNT_ID}:stack/{stack_name}/local",
        }

    def condition(self, name: str) -> bool:
        if name not in self.template.conditions:
            raise Unresolvable(f"unknown condition {name}")
        return bool(self.resolve(self.template.conditions[name]))

    def ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        if name in self.physical:
            return self.physical[name].ref
        raise Unresolvable(f"!Ref {name}: not a parameter or a locally created resource")

    def get_att(self, resource: str, attribute: str) -> str:
        phys = self.physical.get(resource)
        if phys is None or attribute not in phys.attrs:
            raise Unresolvable(f"!GetAtt {resource}.{attribute}: not available locally")
        return phys.attrs[attribute]

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.resolve(v) for v in value]
            return [v for v in items if v is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Condition":
                return self.condition(arg)
            if key.startswith("Fn::"):
                return self._function(key, arg)
        resolved = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not _NO_VALUE}

    def _function(self, name: str, arg: Any) -> Any:
        if name == "Fn::GetAtt":
            resource, attribute = arg if isinstance(arg, list) else str(arg).split(".", 1)
            return self.get_att(resource, self.resolve(attribute))
        if name == "Fn::Sub":
            return self._sub(arg)
        if name == "Fn::Join":
            sep, items = arg
            return str(sep).join(str(v) for v in self.resolve(items))
        if name == "Fn::Select":
            index, items = self.resolve(arg)
            return items[int(index)]
        if name == "Fn::Split":
            sep, text = self.resolve(arg)
            return str(text).split(sep)
        if name == "Fn::If":
            cond, if_true, if_false = arg
            # Only the chosen branch is resolved: the other may name resources that do not exist.
            return self.resolve(if_true if self.condition(cond) else if_false)
        if name == "Fn::Equals":
            left, right = self.resolve(arg)
            return str(left) == str(right)
        if name == "Fn::Not":
            return not self.resolve(arg[0])
        if name == "Fn::And":
            return all(self.resolve(a) for a in arg)
        if name == "Fn::Or":
            return any(self.resolve(a) for a in arg)
        raise Unresolvable(f"{name} is not supported by the local stack")

    def _sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        local_vars = {k: self.resolve(v) for k, v in variables.items()}

        def replace(match: re.Match[str]) -> str:
            expr = match.group(1)
            if expr.startswith("!"):  # ${!Literal} stays as ${Literal}
                return "${" + expr[1:] + "}"
            if expr in local_vars:
                return str(local_vars[expr])
            if "." in expr and not expr.startswith("AWS::"):
                resource, attribute = expr.split(".", 1)
                return self.get_att(resource, attribute)
            return str(self.ref(expr))

        return _SUB_VAR.sub(replace, text)


def references(value: Any) -> set[str]:
    """Logical ids a value points at (Ref, GetAtt, Sub variables): used to order creation."""
    found: set[str] = set()
    if isinstance(value, list):
        for v in value:
            found |= references(v)
    elif isinstance(value, dict):
        for key, arg in value.items():
            if key == "Ref" and isinstance(arg, str):
                found.add(arg)
            elif key == "Fn::GetAtt":
                found.add(arg[0] if isinstance(arg, list) else str(arg).split(".", 1)[0])
            elif key == "Fn::Sub":
                text = arg if isinstance(arg, str) else arg[0]
                found |= {m.split(".", 1)[0] for m in _SUB_VAR.findall(text) if not m.startswith("!")}
                if not isinstance(arg, str):
                    found |= references(arg[1])
            else:
                found |= references(arg)
    return found


# --------------------------------------------------------------------------- creators
@dataclass
class CreateContext:
    region: str
    endpoint_url: str | None
    resolver: Resolver
    _clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = boto3.client(service, region_name=self.region, endpoint_url=self.endpoint_url)
        return self._clients[service]


def _create_table(ctx: CreateContext, logical_id: str, name: str, props: dict[str, Any]) -> Physical:
    ddb = ctx.client("dynamodb")
    kwargs: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": props.get("BillingMode", "PROVISIONED"),
    }
    if kwargs["BillingMode"] == "PROVISIONED":
        kwargs["ProvisionedThroughput"] = props["ProvisionedThroughput"]
    for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if props.get(key):
            kwargs[key] = props[key]
    if "StreamSpecification" in props:
        kwargs["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
    if "SSESpecification" in props:
        sse = props["SSESpecification"]
        kwargs["SSESpecification"] = {"Enabled": bool(sse.get("SSEEnabled"))}
    desc = ddb.create_table(**kwargs)["TableDescription"]
    if "TimeToLiveSpecification" in props:
        ttl = props["TimeToLiveSpecification"]
        ddb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": bool(ttl["Enabled"]), "AttributeName": ttl["AttributeName"]},
        )
    pitr = props.get("PointInTimeRecoverySpecification", {})
    if pitr.get("PointInTimeRecoveryEnabled"):
        ddb.update_continuous_backups(TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    attrs = {"Arn": desc["TableArn"]}
    if desc.get("LatestStreamArn"):
        attrs["StreamArn"] = desc["LatestStreamArn"]
    return Physical("AWS::DynamoDB::Table", name, attrs)


def _create_bucket(ctx: CreateContext, logical_id: str, name: str, props: dict[str, Any]) -> Physical:
    s3 = ctx.client("s3")
    if ctx.region == "us-east-1":
        s3.create_bucket(Bucket=name)
    else:
        s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": ctx.region})
    if "BucketEncryption" in props:
        # CloudFormation says ServerSideEncryptionByDefault where the S3 API says ApplyServerSideEncryptionByDefault.
        rules = [
            {("ApplyServerSideEncryptionByDefault" if k == "ServerSideEncryptionByDefault" else k): v for k, v in rule.items()}
            for rule in props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        ]
        s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration={"Rules": rules})
    if "PublicAccessBlockConfiguration" in props:
        s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"])
    if "OwnershipControls" in props:
        s3.put_bucket_ownership_controls(Bucket=name, OwnershipControls=props["OwnershipControls"])
    if "VersioningConfiguration" in props:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration=props["VersioningConfiguration"])
    # LifecycleConfiguration and the TLS-only bucket policy change nothing a local run could observe.
    return Physical(
        "AWS::S3::Bucket",
        name,
        {
            "Arn": f"arn:aws:s3:::{name}",
            "DomainName": f"{name}.s3.amazonaws.com",
            "RegionalDomainName": f"{name}.s3.{ctx.region}.amazonaws.com",
        },
    )


# CloudFormation queue properties that are SQS queue attributes of the same name.
_QUEUE_ATTRIBUTES = (
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "DelaySeconds",
    "FifoQueue",
    "FifoThroughputLimit",
    "KmsDataKeyReusePeriodSeconds",
    "KmsMasterKeyId",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "RedriveAllowPolicy",
    "RedrivePolicy",
    "SqsManagedSseEnabled",
    "VisibilityTimeout",
)


def _attribute_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _create_queue(ctx: CreateContext, logical_id: str, name: str, props: dict[str, Any]) -> Physical:
    sqs = ctx.client("sqs")
    fifo = bool(props.get("FifoQueue"))
    queue_name = f"{name}.fifo" if fifo else name
    attributes = {key: _attribute_value(props[key]) for key in _QUEUE_ATTRIBUTES if key in props}
    url = sqs.create_queue(QueueName=queue_name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return Physical("AWS::SQS::Queue", url, {"Arn": arn, "QueueName": queue_name, "QueueUrl": url})


def _create_schedule_group(ctx: CreateContext, logical_id: str, name: str, props: dict[str, Any]) -> Physical:
    # moto's CreateSchedule fails on a group that does not exist, so the group must be there first.
    group = props.get("Name") or name
    kwargs: dict[str, Any] = {"Name": group}
    if props.get("Tags"):
        kwargs["Tags"] = props["Tags"]
    arn = ctx.client("scheduler").create_schedule_group(**kwargs)["ScheduleGroupArn"]
    return Physical("AWS::Scheduler::ScheduleGroup", group, {"Arn": arn})


def _create_kms_key(ctx: CreateContext, logical_id: str, name: str, props: dict[str, Any]) -> Physical:
    # The key policy names the account root; the emulator does not enforce policies, so it is not sent.
    meta = ctx.client("kms").create_key(Description=str(props.get("Description", name)))["KeyMetadata"]
    return Physical("AWS::KMS::Key", meta["KeyId"], {"Arn": meta["Arn"], "KeyId": meta["KeyId"]})


def _create_user_pool(ctx: CreateContext, logical_id: str, name: str, props: dict[str, Any]) -> Physical:
    wanted = ("UsernameAttributes", "AutoVerifiedAttributes", "AdminCreateUserConfig", "Policies")
    pool = ctx.client("cognito-idp").create_user_pool(PoolName=name, **{k: props[k] for k in wanted if k in props})
    pool_id = pool["UserPool"]["Id"]
    url = f"https://cognito-idp.{ctx.region}.amazonaws.com/{pool_id}"
    return Physical("AWS::Cognito::UserPool", pool_id, {"Arn": pool["UserPool"]["Arn"], "ProviderURL": url})


# CloudFormation's UserPoolClient properties that CreateUserPoolClient takes under the same name.
_CLIENT_FIELDS = (
    "GenerateSecret",
    "ExplicitAuthFlows",
    "SupportedIdentityProviders",
    "AllowedOAuthFlowsUserPoolClient",
    "AllowedOAuthFlows",
    "AllowedOAuthScopes",
    "CallbackURLs",
    "PreventUserExistenceErrors",
    "EnableTokenRevocation",
    "AccessTokenValidity",
    "IdTokenValidity",
    "RefreshTokenValidity",
    "TokenValidityUnits",
)


def _create_user_pool_client(ctx: CreateContext, logical_id: str, name: str, props: dict[str, Any]) -> Physical:
    made = ctx.client("cognito-idp").create_user_pool_client(
        UserPoolId=props["UserPoolId"],
        ClientName=str(props.get("ClientName", name)),
        **{k: props[k] for k in _CLIENT_FIELDS if k in props},
    )["UserPoolClient"]
    return Physical("AWS::Cognito::UserPoolClient", made["ClientId"], {"ClientId": made["ClientId"]})


Creator = Callable[[CreateContext, str, str, dict[str, Any]], Physical]
CREATORS: dict[str, Creator] = {
    "AWS::DynamoDB::Table": _create_table,
    "AWS::S3::Bucket": _create_bucket,
    "AWS::SQS::Queue": _create_queue,
    "AWS::Scheduler::ScheduleGroup": _create_schedule_group,
    "AWS::KMS::Key": _create_kms_key,
}
# The user pool and its app clients, on request (`start_stack(user_pool=True)`, `python -m
# local.stack --user-pool`): moto's cognito-idp issues their tokens (signed with moto's own key, whose
# JWKS it serves on loopback: AUTH_JWKS_URL) and takes RFC 7591 registrations. Its managed login
# (the hosted /oauth2/authorize and /oauth2/token pages) is not emulated.
USER_POOL_CREATORS: dict[str, Creator] = {
    "AWS::Cognito::UserPool": _create_user_pool,
    "AWS::Cognito::UserPoolClient": _create_user_pool_client,
}
# What the functions see from the pool when there is one: the template's own values (issuer,
# audiences, pool id) instead of the fixed empty ones.
USER_POOL_VARIABLES = ("AUTH_ISSUER", "AUTH_AUDIENCE", "USER_POOL_ID")


# --------------------------------------------------------------------------- the result
def kebab(name: str) -> str:
    """EngramTable -> engram-table; TurnDLQ -> turn-dlq."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", name).lower()


def physical_name(prefix: str, logical_id: str) -> str:
    """engram-local-engram-table, engram-local-turn-dlq: valid names for S3, SQS and DynamoDB alike."""
    return f"{prefix}-{kebab(logical_id)}"


@dataclass
class Resources:
    template: Template
    region: str
    prefix: str
    physical: dict[str, Physical]
    endpoint_url: str | None = None

    def user_pool(self) -> str:
        """The emulated user pool's id ('' without one)."""
        found = [p.ref for p in self.physical.values() if p.type == "AWS::Cognito::UserPool"]
        return found[0] if found else ""

    def emulator_env(self) -> dict[str, str]:
        """Variables the template does not set that the emulated user pool needs: where its signing
        keys are (moto serves them on loopback, not at the issuer's AWS address) and its login base."""
        pool = self.user_pool()
        if not pool or not self.endpoint_url:
            return {}
        return {"AUTH_JWKS_URL": f"{self.endpoint_url}/{pool}/.well-known/jwks.json", "CONSOLE_LOGIN_URL": self.endpoint_url}

    def _get(self, logical_id: str, resource_type: str) -> Physical:
        phys = self.physical.get(logical_id)
        if phys is None or phys.type != resource_type:
            raise KeyError(f"no local {resource_type} named {logical_id}")
        return phys

    def table_name(self, logical_id: str = "EngramTable") -> str:
        return self._get(logical_id, "AWS::DynamoDB::Table").ref

    def bucket_name(self, logical_id: str = "StateBucket") -> str:
        return self._get(logical_id, "AWS::S3::Bucket").ref

    def queue_url(self, logical_id: str) -> str:
        return self._get(logical_id, "AWS::SQS::Queue").ref

    def queue_arn(self, logical_id: str) -> str:
        return self._get(logical_id, "AWS::SQS::Queue").attrs["Arn"]

    def queues(self) -> dict[str, Physical]:
        return {lid: p for lid, p in self.physical.items() if p.type == "AWS::SQS::Queue"}

    def schedule_group(self, logical_id: str = "ScheduleGroup") -> str:
        return self._get(logical_id, "AWS::Scheduler::ScheduleGroup").ref

    def resolver(self, parameters: Mapping[str, Any] | None = None) -> Resolver:
        return Resolver(self.template, self.physical, region=self.region, parameters=parameters, stack_name=self.prefix)

    def env(
        self,
        function_id: str | None = None,
        *,
        model_provider: str = LOCAL_MODEL_PROVIDER,
        parameters: Mapping[str, Any] | None = None,
    ) -> dict[str, str]:
        """The environment variables a function sees: Globals (plus the function's own when named),
        with local resource names and parameter defaults; MODEL_PROVIDER defaults to offline."""
        variables = (
            self.template.function(function_id).environment
            if function_id
            else dict(self.template.function_globals.get("Environment", {}).get("Variables", {}))
        )
        fixed = {**LOCAL_ENV_OVERRIDES, "MODEL_PROVIDER": model_provider}
        if self.user_pool():
            for key in USER_POOL_VARIABLES:
                fixed.pop(key)
        resolver = self.resolver(parameters)
        out: dict[str, str] = {}
        for key, value in variables.items():
            if key in fixed:
                out[key] = fixed[key]
                continue
            try:
                resolved = resolver.resolve(value)
            except Unresolvable as err:
                raise Unresolvable(
                    f"environment variable {key}: {err}; add a creator to local/resources.py "
                    "or a fixed value to LOCAL_ENV_OVERRIDES"
                ) from None
            out[key] = _attribute_value(resolved)
        return out


def create_resources(
    template: Template,
    *,
    prefix: str = "engram-local",
    region: str = "us-east-1",
    endpoint_url: str | None = None,
    user_pool: bool = False,
) -> Resources:
    """Create every resource type in `CREATORS` (and `USER_POOL_CREATORS` with `user_pool`), in
    dependency order; other types are cloud-only."""
    creators = {**CREATORS, **(USER_POOL_CREATORS if user_pool else {})}
    wanted = {lid: res for lid, res in template.resources.items() if res.get("Type") in creators}
    physical: dict[str, Physical] = {}
    ctx = CreateContext(
        region=region, endpoint_url=endpoint_url, resolver=Resolver(template, physical, region=region, stack_name=prefix)
    )
    pending = dict(wanted)
    while pending:
        ready = [lid for lid, res in pending.items() if not (references(res.get("Properties", {})) & (pending.keys() - {lid}))]
        if not ready:
            raise ValueError(f"circular references between {sorted(pending)}")
        for lid in sorted(ready):
            res = pending.pop(lid)
            if "Condition" in res and not ctx.resolver.condition(res["Condition"]):
                continue
            props = ctx.resolver.resolve(res.get("Properties", {}))
            physical[lid] = creators[res["Type"]](ctx, lid, physical_name(prefix, lid), props)
    return Resources(template=template, region=region, prefix=prefix, physical=physical, endpoint_url=endpoint_url)
