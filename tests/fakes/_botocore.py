"""What every fake client borrows from botocore: the service model (so parameters are validated
exactly as a real client validates them), the modelled exception classes (`client.exceptions.X`),
the paginator configs, and the response envelope."""

from __future__ import annotations

import functools
import uuid
from types import SimpleNamespace
from typing import Any

import botocore.session
from botocore import xform_name
from botocore.errorfactory import ClientExceptionsFactory
from botocore.exceptions import ClientError, OperationNotPageableError
from botocore.model import ServiceModel
from botocore.paginate import Paginator
from botocore.validate import validate_parameters

from tests.fakes import client_error


@functools.cache
def service(name: str) -> tuple[ServiceModel, Any, dict[str, Any]]:
    """Service model, exception classes and paginator configs, loaded once per process (~40 ms)."""
    session = botocore.session.get_session()
    model = session.get_service_model(name)
    exceptions = ClientExceptionsFactory().create_client_exceptions(model)
    try:
        paginators = session.get_component("data_loader").load_service_model(name, "paginators-1")["pagination"]
    except Exception:  # a service without paginators
        paginators = {}
    return model, exceptions, paginators


def ok(body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    body["ResponseMetadata"] = {"RequestId": str(uuid.uuid4()), "HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0}
    return body


def modelled_error(name: str, operation: str, code: str, message: str, *, status: int = 400, **extra: Any) -> ClientError:
    """The ClientError botocore raises: the modelled class for `code` when the service has one."""
    err = client_error(operation, code, message, status=status, **extra)
    cls = service(name)[1].from_code(code)
    return cls(err.response, operation) if cls is not ClientError else err


class FakeClient:
    """The parts of a boto3 client every fake shares: region, meta, exceptions, validation, paginators."""

    SERVICE = ""

    def __init__(self, region: str = "us-east-1"):
        model, exceptions, _ = service(self.SERVICE)
        self.region = region
        self.exceptions = exceptions
        self.meta = SimpleNamespace(region_name=region, service_model=model)

    def _validate(self, operation: str, params: dict[str, Any]) -> None:
        """Botocore's own parameter validation: a wrong or missing parameter fails as on a real client."""
        validate_parameters(params, service(self.SERVICE)[0].operation_model(operation).input_shape)

    def can_paginate(self, operation_name: str) -> bool:
        return any(xform_name(name) == operation_name for name in service(self.SERVICE)[2])

    def get_paginator(self, operation_name: str) -> Paginator:
        """botocore's Paginator over this fake's method, with the service's real paginator config."""
        model, _, paginators = service(self.SERVICE)
        for name, config in paginators.items():
            if xform_name(name) == operation_name:
                return Paginator(getattr(self, operation_name), config, model.operation_model(name))
        raise OperationNotPageableError(operation_name=operation_name)
