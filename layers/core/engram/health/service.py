"""Whether the model provider is configured, as a person setting the stack up needs to know it.

Answered without a token, so it shows no secret and no resource name: only the provider, the
chat model, whether it can be used, and the step that is missing. It does not call the model."""

from __future__ import annotations

from engram.aws.model_key import api_key
from engram.kernel.errors import ModelNotConfigured
from engram.kernel.settings import PROVIDER_NOT_SET, Settings

ANTHROPIC_STEP = (
    "put your Anthropic API key in the stack's secret (stack output AnthropicSecretArn): "
    "aws secretsmanager put-secret-value --secret-id <AnthropicSecretArn> --secret-string sk-ant-..."
)
BEDROCK_STEP = "enable access to the Claude models in the Bedrock console of the stack's region (checked on the first turn)"


def model_status(settings: Settings) -> dict[str, object]:
    """Raises ModelNotConfigured (503) when a deployed function names no provider (MODEL_PROVIDER)."""
    provider = settings.model_provider
    if provider is None:
        raise ModelNotConfigured(PROVIDER_NOT_SET)
    configured: bool | None = True
    step = None
    if provider == "anthropic":
        try:
            api_key(settings)
        except ModelNotConfigured:
            configured, step = False, ANTHROPIC_STEP
    elif provider == "bedrock":
        configured, step = None, BEDROCK_STEP  # IAM and model access show only when the model is called
    return {
        "status": "ok" if configured is not False else "needs_setup",
        "model": {"provider": provider, "chatModel": settings.chat_model, "configured": configured, "nextStep": step},
    }
