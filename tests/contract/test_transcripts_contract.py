"""HistoryRepository (session transcripts in S3) and the S3 calls under it, on the fake and on moto."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from engram.aws.keys import session_object, session_prefix
from engram.conversations.models import History
from engram.conversations.transcripts import HistoryRepository
from engram.kernel.errors import SessionBusy

T = "tenant-1"


def _messages(*texts: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text} for text in texts]


@pytest.fixture
def store(backend) -> HistoryRepository:
    return backend.stores.history  # type: ignore[no-any-return]


@pytest.fixture
def s3(backend) -> Any:
    return boto3.client("s3", region_name=backend.resources.region)


def _code(err: pytest.ExceptionInfo[ClientError]) -> str:
    return str(err.value.response["Error"]["Code"])


NONE = History(messages=[], etag=None)


def _save(store: HistoryRepository, session: str, messages: list[dict[str, Any]], previous: History, run: str) -> str:
    return store.save(T, "a1", session, messages, previous=previous, run_id=run)


def test_a_session_without_a_transcript_loads_empty(store):
    assert store.load(T, "a1", "dashboard", committed_run=None) == NONE


def test_a_new_transcript_is_saved_and_loaded_with_its_etag_and_run(store, s3, backend):
    etag = _save(store, "dashboard", _messages("hi", "hello"), NONE, "run_1")
    loaded = store.load(T, "a1", "dashboard", committed_run="run_1")
    assert loaded == History(messages=_messages("hi", "hello"), etag=etag, run_id="run_1")
    raw = s3.get_object(Bucket=backend.settings.bucket_name, Key=session_object(T, "a1", "dashboard"))
    body = raw["Body"].read()
    assert etag == f'"{hashlib.md5(body).hexdigest()}"'
    assert raw["ETag"] == etag and raw["ContentType"] == "application/json" and raw["ContentLength"] == len(body)
    assert raw["Metadata"] == {"run-id": "run_1"}
    assert json.loads(body) == {
        "version": 2,
        "runId": "run_1",
        "messages": _messages("hi", "hello"),
        "base": {"runId": None, "dropped": [], "kept": 0},
    }


def test_a_save_with_the_current_etag_replaces_the_transcript(store):
    first = _save(store, "s1", _messages("one"), NONE, "run_1")
    loaded = store.load(T, "a1", "s1", committed_run="run_1")
    second = _save(store, "s1", _messages("one", "two"), loaded, "run_2")
    assert second != first
    assert store.load(T, "a1", "s1", committed_run="run_2") == History(_messages("one", "two"), second, "run_2")


def test_a_save_with_a_stale_etag_is_session_busy_and_changes_nothing(store):
    first = _save(store, "s1", _messages("one"), NONE, "run_1")
    current = _save(store, "s1", _messages("one", "two"), History(_messages("one"), first, "run_1"), "run_2")
    with pytest.raises(SessionBusy):
        _save(store, "s1", _messages("mine"), History(_messages("one"), first, "run_1"), "run_3")
    assert store.load(T, "a1", "s1", committed_run="run_2") == History(_messages("one", "two"), current, "run_2")


def test_a_new_transcript_over_an_existing_one_is_session_busy(store):
    etag = _save(store, "s1", _messages("theirs"), NONE, "run_1")
    with pytest.raises(SessionBusy):
        _save(store, "s1", _messages("mine"), NONE, "run_2")  # If-None-Match: *
    assert store.load(T, "a1", "s1", committed_run="run_1") == History(_messages("theirs"), etag, "run_1")


def test_a_retried_save_finds_its_own_write_and_stands(store):
    """The retry of a PUT whose response was lost fails its condition against itself."""
    first = _save(store, "s1", _messages("one"), NONE, "run_1")
    assert _save(store, "s1", _messages("one"), NONE, "run_1") == first
    previous = History(_messages("one"), first, "run_1")
    second = _save(store, "s1", _messages("one", "two"), previous, "run_2")
    assert _save(store, "s1", _messages("one", "two"), previous, "run_2") == second


def test_if_match_on_a_deleted_transcript_is_no_such_key_not_a_precondition_failure(store):
    """S3 (and moto) answer 404 NoSuchKey, so HistoryRepository.save lets a ClientError through here."""
    etag = _save(store, "s1", _messages("one"), NONE, "run_1")
    store.delete(T, "a1", "s1")
    with pytest.raises(ClientError) as err:
        _save(store, "s1", _messages("two"), History(_messages("one"), etag, "run_1"), "run_2")
    assert _code(err) == "NoSuchKey" and err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_a_transcript_whose_turn_never_committed_reads_as_the_committed_one(store):
    committed = _save(store, "s1", _messages("old"), NONE, "run_1")
    uncommitted = _save(store, "s1", _messages("old", "failed turn"), History(_messages("old"), committed, "run_1"), "run_2")
    # The session row still names run_1: the object's newer turn is not part of the session.
    assert store.load(T, "a1", "s1", committed_run="run_1") == History(_messages("old"), uncommitted, "run_1")
    # The next turn writes over it (If-Match the object as it is) and commits.
    base = store.load(T, "a1", "s1", committed_run="run_1")
    _save(store, "s1", _messages("old", "next turn"), base, "run_3")
    assert store.load(T, "a1", "s1", committed_run="run_3").messages == _messages("old", "next turn")


def test_the_first_turn_of_a_session_that_never_committed_reads_as_empty(store):
    etag = _save(store, "s1", _messages("failed turn"), NONE, "run_1")
    assert store.load(T, "a1", "s1", committed_run=None) == History(messages=[], etag=etag, run_id=None)


def test_the_committed_transcript_survives_trimming_and_notices(store):
    old = _messages("m1", "m2", "m3", "m4")
    etag = _save(store, "s1", old, NONE, "run_1")
    trimmed = _save(store, "s1", _messages("m3", "m4", "m5", "m6"), History(old, etag, "run_1"), "run_2")
    assert store.load(T, "a1", "s1", committed_run="run_1") == History(old, trimmed, "run_1")
    # A trim that inserts a notice is no tail of the old list: the old one is kept whole.
    base = store.load(T, "a1", "s1", committed_run="run_1")
    noticed = _save(store, "s1", _messages("[earlier messages trimmed]", "m6"), base, "run_3")
    assert store.load(T, "a1", "s1", committed_run="run_1") == History(old, noticed, "run_1")


def test_a_transcript_written_before_transcripts_named_their_run_is_committed(store, s3, backend):
    key = session_object(T, "a1", "s1")
    s3.put_object(Bucket=backend.settings.bucket_name, Key=key, Body=json.dumps({"version": 1, "messages": _messages("v1")}))
    assert store.load(T, "a1", "s1", committed_run="run_9").messages == _messages("v1")


def test_delete_removes_a_transcript_and_a_missing_one_is_fine(store):
    _save(store, "s1", _messages("x"), NONE, "run_1")
    store.delete(T, "a1", "s1")
    store.delete(T, "a1", "s1")
    store.delete(T, "a1", "never")
    assert store.load(T, "a1", "s1", committed_run="run_1") == NONE


class _SmallPages:
    """The store's S3 client with list pages of 2 keys: delete_agent's paging, without 1000 objects."""

    def __init__(self, client: Any):
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def get_paginator(self, name: str) -> Any:
        paginator = self._client.get_paginator(name)

        class Paged:
            def paginate(self, **kwargs: Any) -> Any:
                return paginator.paginate(**kwargs, PaginationConfig={"PageSize": 2})

        return Paged()


def test_delete_agent_removes_every_session_of_that_agent_over_several_pages(backend, s3):
    store = HistoryRepository(backend.settings.bucket_name, client=_SmallPages(s3))
    for session in ("s1", "s2", "s3", "s4", "s5"):
        store.save(T, "a1", session, _messages(session), previous=NONE, run_id="run_1")
    store.save(T, "a10", "s1", _messages("a prefix of a1, not a1"), previous=NONE, run_id="run_1")
    store.save(T, "a2", "s1", _messages("other agent"), previous=NONE, run_id="run_1")
    store.save("tenant-2", "a1", "s1", _messages("other tenant"), previous=NONE, run_id="run_1")
    assert store.delete_agent(T, "a1") == 5
    assert store.delete_agent(T, "a1") == 0
    left = s3.list_objects_v2(Bucket=backend.settings.bucket_name)
    assert [o["Key"] for o in left["Contents"]] == sorted(
        [session_object(T, "a10", "s1"), session_object(T, "a2", "s1"), session_object("tenant-2", "a1", "s1")]
    )


def test_list_objects_v2_pages_with_max_keys_and_continuation_tokens(backend, s3):
    bucket = backend.settings.bucket_name
    prefix = session_prefix(T, "a1")
    keys = [f"{prefix}s{i}.json" for i in range(5)]
    for key in reversed(keys):
        s3.put_object(Bucket=bucket, Key=key, Body=b"{}")
    s3.put_object(Bucket=bucket, Key="elsewhere.json", Body=b"{}")
    seen, pages, token = [], 0, None
    while True:
        page = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=2, **({"ContinuationToken": token} if token else {}))
        pages += 1
        seen += [o["Key"] for o in page["Contents"]]
        assert page["KeyCount"] == len(page["Contents"]) and page["MaxKeys"] == 2
        if not page["IsTruncated"]:
            assert "NextContinuationToken" not in page
            break
        token = page["NextContinuationToken"]
    assert (seen, pages) == (keys, 3)
    assert s3.list_objects_v2(Bucket=bucket, Prefix=prefix, StartAfter=keys[2])["KeyCount"] == 2
    empty = s3.list_objects_v2(Bucket=bucket, Prefix="nothing/")
    assert (empty["KeyCount"], empty["IsTruncated"], "Contents" in empty) == (0, False, False)
    paged = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": 2})
    assert [o["Key"] for o in paged.build_full_result()["Contents"]] == keys
    by_folder = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in by_folder["CommonPrefixes"]] == ["state/"]
    assert [o["Key"] for o in by_folder["Contents"]] == ["elsewhere.json"]


def test_objects_keep_their_content_type_and_metadata(backend, s3):
    bucket = backend.settings.bucket_name
    out = s3.put_object(Bucket=bucket, Key="k.txt", Body="héllo", ContentType="text/plain", Metadata={"origin": "test"})
    assert out["ETag"] == f'"{hashlib.md5("héllo".encode()).hexdigest()}"'
    head = s3.head_object(Bucket=bucket, Key="k.txt")
    assert (head["ContentType"], head["Metadata"], head["ContentLength"], head["ETag"]) == (
        "text/plain",
        {"origin": "test"},
        len("héllo".encode()),
        out["ETag"],
    )
    assert s3.get_object(Bucket=bucket, Key="k.txt")["Body"].read().decode() == "héllo"


def test_missing_objects_and_buckets_fail_like_s3(backend, s3):
    bucket = backend.settings.bucket_name
    with pytest.raises(s3.exceptions.NoSuchKey) as err:
        s3.get_object(Bucket=bucket, Key="missing")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as err:
        s3.head_object(Bucket=bucket, Key="missing")
    assert _code(err) == "404"
    with pytest.raises(s3.exceptions.NoSuchBucket):
        s3.get_object(Bucket="engram-no-such-bucket", Key="k")
    with pytest.raises(s3.exceptions.NoSuchBucket):
        s3.put_object(Bucket="engram-no-such-bucket", Key="k", Body=b"")
    s3.delete_object(Bucket=bucket, Key="missing")  # no error
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="k", Body=b"x", IfMatch='"0123"')
    assert _code(err) == "NoSuchKey"


def test_conditional_puts_answer_412_with_the_condition(backend, s3):
    bucket = backend.settings.bucket_name
    etag = s3.put_object(Bucket=bucket, Key="k", Body=b"v1", IfNoneMatch="*")["ETag"]
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="k", Body=b"v2", IfNoneMatch="*")
    assert (_code(err), err.value.response["Error"]["Condition"]) == ("PreconditionFailed", "If-None-Match")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="k", Body=b"v2", IfMatch='"0123"')
    assert (_code(err), err.value.response["Error"]["Condition"]) == ("PreconditionFailed", "If-Match")
    assert s3.put_object(Bucket=bucket, Key="k", Body=b"v2", IfMatch=etag)["ETag"] != etag


def test_delete_objects_reports_what_it_deleted(backend, s3):
    bucket = backend.settings.bucket_name
    for key in ("a", "b"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    out = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "a"}, {"Key": "b"}, {"Key": "never"}]})
    assert sorted(d["Key"] for d in out["Deleted"]) == ["a", "b", "never"] and not out.get("Errors")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_the_bucket_has_the_templates_encryption_and_public_access_block(backend, s3):
    bucket = backend.settings.bucket_name
    rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    block = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    assert block == dict.fromkeys(("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets"), True)


def test_parameters_are_validated_like_a_real_client(backend, s3):
    from botocore.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        s3.put_object(Bucket=backend.settings.bucket_name, Body=b"no key")
    with pytest.raises(ParamValidationError):
        s3.get_object(Bucket=backend.settings.bucket_name, Key="k", NotAParameter=1)
