"""The local stack: template.yaml's own resources in moto, the same handlers behind an emulated HTTP API.

- `template`: read template.yaml (CloudFormation short tags included) and list functions, routes, queues.
- `resources`: create the table, bucket and queues from the template's Properties.
- `apigw`: API Gateway HTTP API (payload v2.0) events, the emulated JWT authorizer, handler loading.
- `workers`: SQS event-source pollers that feed queue consumers like Lambda does.
- `stack`: `python -m local.stack` (make dev) and `start_stack()` for end-to-end tests.
"""
