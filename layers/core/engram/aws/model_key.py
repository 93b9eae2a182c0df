"""The Anthropic API key: ANTHROPIC_API_KEY (local runs) or the stack's secret, read through
powertools Parameters and cached 5 minutes per container, so a rotated key is seen within 5
minutes without a redeploy. A missing or empty key is ModelNotConfigured naming what to set."""

from __future__ import annotations

import re

from engram.kernel.errors import ModelNotConfigured
from engram.kernel.settings import Settings

KEY_MAX_AGE_S = 300
# What the stack's secret can answer while nobody has put a key in it (the template creates it
# empty: no version yet), or when the function may not read it.
_UNREADABLE = ("ResourceNotFoundException", "AccessDeniedException", "DecryptionFailure", "InvalidRequestException")


def secret_name(arn: str) -> str:
    """`arn:aws:secretsmanager:<region>:<account>:secret:<name>-AbCdEf` -> `<name>`."""
    name = arn.split(":secret:", 1)[-1]
    return re.sub(r"-[A-Za-z0-9]{6}$", "", name)


def put_key_hint(settings: Settings) -> str:
    return (
        f"put your key in the secret {secret_name(settings.anthropic_secret_arn)} "
        "(stack output AnthropicSecretArn: aws secretsmanager put-secret-value --secret-id <arn> --secret-string sk-ant-...)"
    )


def api_key(settings: Settings) -> str:
    if settings.anthropic_api_key:
        return settings.anthropic_api_key
    if not settings.anthropic_secret_arn:
        raise ModelNotConfigured(
            "no Anthropic API key is configured: set ANTHROPIC_API_KEY (local), or ANTHROPIC_SECRET_ARN (the stack's "
            "AnthropicApiKey secret), or use MODEL_PROVIDER=bedrock"
        )
    from aws_lambda_powertools.utilities import parameters

    try:
        secret = parameters.get_secret(settings.anthropic_secret_arn, max_age=KEY_MAX_AGE_S)
    except parameters.exceptions.GetParameterError as err:
        if any(code in str(err) for code in _UNREADABLE):
            raise ModelNotConfigured(
                f"the Anthropic API key cannot be read (empty or not readable): {put_key_hint(settings)}"
            ) from None
        raise
    key = (secret.decode() if isinstance(secret, bytes) else str(secret)).strip()
    if not key:
        raise ModelNotConfigured(f"the Anthropic API key secret is empty: {put_key_hint(settings)}")
    return key
