#!/usr/bin/python3
"""A test worker on SGLang's own HTTP stack: FastAPI + Starlette + uvicorn, run as SGLang runs them.

Only the model is fake. The HTTP layer is SGLang's, copied from its source so that every answer,
every error and every closed connection is what a real SGLang server gives Baton:

- `generate_request` (the `/generate` route) is SGLang's, as written in
  `python/sglang/srt/entrypoints/http_server.py` (`generate_request`; read at commits 0025436e and
  9c0549b7 of sgl-project/sglang): the stream branch's `stream_results` generator catches only
  `ValueError` (one in-band `{"error": {...}}` frame, then `[DONE]`), the unary branch turns a
  `ValueError` into 400 `{"error": {"message"}}` (`_create_error_response`), and anything else
  propagates to Starlette and uvicorn untouched: a 500 for a unary request, and for a stream a
  connection closed after its 200 headers (uvicorn's `run_asgi`: `self.transport.close()` once
  the response has started).
- The request goes through the tokenizer manager's steps in SGLang's order
  (`python/sglang/srt/managers/tokenizer_manager.py`: `generate_request`,
  `_tokenize_one_request`, `_validate_one_request`, `_create_tokenized_object`, which builds
  `SamplingParams(**{**preferred_sampling_params, **obj.sampling_params})`, then `normalize` and
  `verify`). An unknown sampling key is therefore a `TypeError` raised inside the stream, exactly
  as in SGLang.
- `SamplingParams` follows `python/sglang/srt/sampling/sampling_params.py` (its `__init__` keyword
  list and null handling, `verify()` and its messages, `normalize()`'s refusal of `stop` /
  `stop_regex` without a tokenizer).
- Streaming follows the scheduler's `stream_output_generation`
  (`python/sglang/srt/managers/scheduler_output_processor_mixin.py`): with `stream_interval` > 1 a
  running request is sent when `len(output_ids) % stream_interval == 1`, and always when it
  finishes; cumulative chunks by default (SGLang's default), deltas with
  `--incremental-streaming-output`.
- uvicorn runs with `timeout_keep_alive=5`, as SGLang's `launch_server` calls `uvicorn.run`.

The model: the next token is a hash of the last four ids of the sequence so far (prompt + output),
so a continuation sent as prompt + generated tokens produces exactly the tokens the original would
have. Token-only (`--skip-tokenizer-init` shape: no `text` key).

Run with Debian's /usr/bin/python3 (packages python3-fastapi python3-uvicorn python3-httptools
python3-h11). It prints `listening on http://127.0.0.1:PORT` once it serves.
"""

import argparse
import asyncio
import dataclasses
import json
import logging
import math
import socket
import sys
import time
import uuid
from http import HTTPStatus
from typing import Any, AsyncIterator, Dict, List, Optional, Union

import uvicorn
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTasks

logger = logging.getLogger("sglang_worker")

# SGLang writes with orjson (`ORJSONResponse`, `orjson.dumps(out, option=orjson.OPT_NON_STR_KEYS)`).
# Debian has no python3-orjson: JSONResponse renders the same compact UTF-8 JSON
# (`separators=(",", ":")`, `ensure_ascii=False`) with the same `application/json` type.
try:
    import orjson
    from fastapi.responses import ORJSONResponse

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)

except ImportError:  # pragma: no cover - depends on the machine
    ORJSONResponse = JSONResponse

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


HEALTH_CHECK_TIMEOUT = 20  # http_server.py: SGLANG_HEALTH_CHECK_TIMEOUT's default


# --------------------------------------------------------------------------- server arguments


@dataclasses.dataclass
class ServerArgs:
    """The part of SGLang's ServerArgs that /get_server_info shows and this worker reads."""

    model_path: str = "baton/realstack-hash-model"
    tokenizer_path: Optional[str] = None
    served_model_name: str = "baton/realstack-hash-model"
    host: str = "127.0.0.1"
    port: int = 0
    skip_tokenizer_init: bool = True
    incremental_streaming_output: bool = False
    stream_interval: int = 1
    context_length: int = 4096
    preferred_sampling_params: Optional[Dict[str, Any]] = None
    weight_version: str = "default"
    dp_size: int = 1
    tp_size: int = 1
    page_size: int = 1
    disable_radix_cache: bool = False
    enable_custom_logit_processor: bool = False
    log_level: str = "warning"
    # Not SGLang's: the fake model's speed, and the uvicorn HTTP implementation.
    token_delay_ms: float = 5.0
    http: str = "h11"


VOCAB_SIZE = 32000
EOS_TOKEN_ID = 2
MAX_TOTAL_NUM_TOKENS = 1 << 20


# --------------------------------------------------------------------------- sampling params

_SAMPLING_EPS = 1e-6
TOP_K_ALL = 1 << 30


class SamplingParams:
    """sampling/sampling_params.py: the keyword list is the API; anything else is a TypeError."""

    def __init__(
        self,
        max_new_tokens: Optional[int] = 128,
        stop: Optional[Union[str, List[str]]] = None,
        stop_token_ids: Optional[List[int]] = None,
        stop_regex: Optional[Union[str, List[str]]] = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = -1,
        min_p: float = 0.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        repetition_penalty: float = 1.0,
        min_new_tokens: int = 0,
        n: int = 1,
        json_schema: Optional[str] = None,
        regex: Optional[str] = None,
        ebnf: Optional[str] = None,
        structural_tag: Optional[str] = None,
        ignore_eos: bool = False,
        skip_special_tokens: bool = True,
        spaces_between_special_tokens: bool = True,
        no_stop_trim: bool = False,
        custom_params: Optional[Dict[str, Any]] = None,
        stream_interval: Optional[int] = None,
        logit_bias: Optional[Dict[str, float]] = None,
        sampling_seed: Optional[int] = None,
    ) -> None:
        self.max_new_tokens = max_new_tokens
        self.stop_strs = stop
        self.stop_token_ids = {int(t) for t in stop_token_ids if t is not None} if stop_token_ids else None
        self.stop_regex_strs = stop_regex
        # Explicit nulls mean "use the default" (SamplingParams.__post_init__).
        self.temperature = temperature if temperature is not None else 1.0
        self.top_p = top_p if top_p is not None else 1.0
        self.top_k = top_k if top_k is not None else -1
        self.min_p = min_p if min_p is not None else 0.0
        self.frequency_penalty = frequency_penalty if frequency_penalty is not None else 0.0
        self.presence_penalty = presence_penalty if presence_penalty is not None else 0.0
        self.repetition_penalty = repetition_penalty if repetition_penalty is not None else 1.0
        self.min_new_tokens = min_new_tokens if min_new_tokens is not None else 0
        self.n = n if n is not None else 1
        self.json_schema = json_schema
        self.regex = regex
        self.ebnf = ebnf
        self.structural_tag = structural_tag
        self.ignore_eos = ignore_eos if ignore_eos is not None else False
        self.skip_special_tokens = skip_special_tokens
        self.spaces_between_special_tokens = spaces_between_special_tokens
        self.no_stop_trim = no_stop_trim
        self.custom_params = custom_params
        self.stream_interval = stream_interval
        self.logit_bias = logit_bias
        self.sampling_seed = sampling_seed

        # Process some special cases
        if 0 <= self.temperature < _SAMPLING_EPS:
            # top_k = 1 means greedy sampling
            self.temperature = 1.0
            self.top_k = 1
        if self.top_k == -1:
            self.top_k = TOP_K_ALL  # whole vocabulary

    def verify(self, vocab_size: int) -> None:
        if not math.isfinite(self.temperature) or self.temperature < 0.0:
            raise ValueError(f"temperature must be a non-negative finite number, got {self.temperature}.")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}.")
        if self.top_k < 1 or self.top_k == -1:
            raise ValueError(f"top_k must be -1 (disable) or at least 1, got {self.top_k}.")
        if not -2.0 <= self.frequency_penalty <= 2.0:
            raise ValueError(f"frequency_penalty must be in [-2, 2], got {self.frequency_penalty}.")
        if not -2.0 <= self.presence_penalty <= 2.0:
            raise ValueError(f"presence_penalty must be in [-2, 2], got {self.presence_penalty}.")
        if not 0.0 < self.repetition_penalty <= 2.0:
            raise ValueError(
                f"repetition_penalty must be in (0, 2] (1.0 = no penalty), got {self.repetition_penalty}."
            )
        if not 0 <= self.min_new_tokens:
            raise ValueError(f"min_new_tokens must be in [0, max_new_tokens], got {self.min_new_tokens}.")
        if self.max_new_tokens is not None:
            if self.max_new_tokens < 0:
                raise ValueError(f"max_new_tokens must be at least 0, got {self.max_new_tokens}.")
            if not self.min_new_tokens <= self.max_new_tokens:
                raise ValueError(
                    f"min_new_tokens must be in [0, max_new_tokens({self.max_new_tokens})], got "
                    f"{self.min_new_tokens}."
                )
        if self.logit_bias is not None:
            for token_id in self.logit_bias:
                if not 0 <= int(token_id) < vocab_size:
                    raise ValueError(f"logit_bias must has keys in [0, {vocab_size - 1}], got {token_id}.")
        grammars = [self.json_schema, self.regex, self.ebnf]
        if sum(x is not None for x in grammars) > 1:
            raise ValueError("Only one of regex, json_schema, or ebnf can be set.")

    def normalize(self, tokenizer: Any) -> None:
        # raise_if_tokenizer_required: string stops need a tokenizer, which a token-only server
        # does not have. (The newest SGLang also refuses min_new_tokens > 0 there; Baton's
        # continuations carry a reduced min_new_tokens, so this worker keeps the older rule.)
        if tokenizer is not None:
            return
        if self.stop_strs:
            raise ValueError(
                f"stop={self.stop_strs!r} is unavailable when skip_tokenizer_init=True "
                "(requires tokenizer to decode tokens to text for matching)."
            )
        if self.stop_regex_strs:
            raise ValueError(
                f"stop_regex={self.stop_regex_strs!r} is unavailable when skip_tokenizer_init=True "
                "(requires tokenizer to decode tokens to text for matching)."
            )


# --------------------------------------------------------------------------- request objects


@dataclasses.dataclass
class GenerateReqInput:
    """managers/io_struct.py GenerateReqInput: the fields a token-only /generate reads."""

    text: Optional[Union[List[str], str]] = None
    input_ids: Optional[Union[List[List[int]], List[int]]] = None
    input_embeds: Optional[Union[List[List[List[float]]], List[List[float]]]] = None
    sampling_params: Optional[Union[List[Dict], Dict]] = None
    rid: Optional[Union[List[str], str]] = None
    return_logprob: Optional[Union[List[bool], bool]] = None
    logprob_start_len: Optional[Union[List[int], int]] = None
    top_logprobs_num: Optional[Union[List[int], int]] = None
    return_text_in_logprobs: bool = False
    stream: bool = False
    log_metrics: bool = True
    custom_logit_processor: Optional[Union[List[Optional[str]], str]] = None
    return_hidden_states: Union[List[bool], bool] = False

    def normalize_batch_and_arguments(self) -> None:
        if (self.text is None and self.input_ids is None and self.input_embeds is None) or (
            self.text is not None and self.input_ids is not None and self.input_embeds is not None
        ):
            raise ValueError("Either text, input_ids or input_embeds should be provided.")
        if self.text is not None and self.input_ids is None:
            self.is_single = isinstance(self.text, str)
            self.batch_size = 1 if self.is_single else len(self.text)
        else:
            if self.input_ids is not None and len(self.input_ids) == 0:
                raise ValueError("input_ids cannot be empty.")
            self.is_single = not isinstance((self.input_ids or [None])[0], list)
            self.batch_size = 1 if self.is_single else len(self.input_ids)
        if self.sampling_params is None:
            self.sampling_params = {} if self.is_single else [{}] * self.batch_size
        if self.is_single:
            if self.rid is None:
                self.rid = uuid.uuid4().hex
            if self.return_logprob is None:
                self.return_logprob = False
            if self.logprob_start_len is None:
                self.logprob_start_len = -1
            if self.top_logprobs_num is None:
                self.top_logprobs_num = 0
        else:
            # _normalize_rid: a string rid names each item `<rid>_<i>`.
            if self.rid is None:
                self.rid = [uuid.uuid4().hex for _ in range(self.batch_size)]
            elif isinstance(self.rid, str):
                self.rid = [f"{self.rid}_{i}" for i in range(self.batch_size)]
            for name, default in (("return_logprob", False), ("logprob_start_len", -1), ("top_logprobs_num", 0)):
                v = getattr(self, name)
                if not isinstance(v, list):
                    setattr(self, name, [default if v is None else v] * self.batch_size)
            if isinstance(self.sampling_params, dict):
                self.sampling_params = [self.sampling_params] * self.batch_size

    def __getitem__(self, i: int) -> "GenerateReqInput":
        item = GenerateReqInput(
            text=self.text[i] if self.text is not None and self.input_ids is None else None,
            input_ids=self.input_ids[i] if self.input_ids is not None else None,
            sampling_params=self.sampling_params[i],
            rid=self.rid[i],
            return_logprob=self.return_logprob[i],
            logprob_start_len=self.logprob_start_len[i],
            top_logprobs_num=self.top_logprobs_num[i],
            stream=self.stream,
            log_metrics=self.log_metrics,
        )
        item.is_single = True
        item.batch_size = 1
        return item


@dataclasses.dataclass
class AbortReq:
    rid: str = ""
    abort_all: bool = False


# --------------------------------------------------------------------------- the model


def _mix(h: int, t: int) -> int:
    return ((h ^ (t & 0xFFFFFFFF)) * 0x01000193) & 0xFFFFFFFF


def _state(seq: List[int]) -> int:
    """The model's state: an FNV-1a hash of the last four ids (nothing else of the history)."""
    h = 0x811C9DC5
    for t in seq[-4:]:
        h = _mix(h, t)
    return h


def next_token(seq: List[int]) -> int:
    return _state(seq) % VOCAB_SIZE


def logprob(seq: List[int], token: int) -> float:
    """log p(token | seq), a multiple of 1/1024 in [-4, -1/1024]: printed alike by Python and JS."""
    h = _mix(_state(seq), token * 2654435761)
    return -float((h >> 8) % 4096 + 1) / 1024.0


def top_logprobs(seq: List[int], n: int) -> List[List[Any]]:
    best = next_token(seq)
    lp = logprob(seq, best)
    return [[lp - k / 8.0, (best + k) % VOCAB_SIZE, None] for k in range(n)]


class RadixCache:
    """Prefix cache: cached_tokens is the longest cached prefix of a prompt (its last id excluded)."""

    def __init__(self) -> None:
        self.root: Dict[int, Any] = {}

    def match(self, ids: List[int]) -> int:
        node, n = self.root, 0
        for t in ids[:-1]:
            node = node.get(t)
            if node is None:
                break
            n += 1
        return n

    def insert(self, ids: List[int]) -> None:
        node = self.root
        for t in ids:
            node = node.setdefault(t, {})

    def clear(self) -> None:
        self.root = {}


# --------------------------------------------------------------------------- tokenizer manager


class ReqState:
    def __init__(self, obj: GenerateReqInput) -> None:
        self.obj = obj
        self.out_list: List[Dict[str, Any]] = []
        self.finished = False
        self.event = asyncio.Event()
        self.created_time = time.time()
        self.task: Optional[asyncio.Task] = None
        self.aborted = False


class TokenizerManager:
    """The steps of SGLang's TokenizerManager that decide what a /generate client sees; the
    scheduler is one asyncio task per request running the hash model."""

    def __init__(self, args: ServerArgs) -> None:
        self.server_args = args
        self.rid_to_state: Dict[str, ReqState] = {}
        self.preferred_sampling_params = args.preferred_sampling_params
        self.context_len = args.context_length
        self.tokenizer = None  # --skip-tokenizer-init
        self.cache = RadixCache()
        self.gracefully_exit = False
        self.last_receive_tstamp = 0.0

    # tokenizer_manager.py generate_request
    async def generate_request(self, obj: GenerateReqInput, request: Optional[Request] = None):
        obj.normalize_batch_and_arguments()
        if obj.is_single:
            self._init_req_state(obj)
            try:
                tokenized = self._tokenize_one_request(obj)
                self._send_one_request(obj, tokenized)
                async for response in self._wait_one_response(obj, request):
                    yield response
            except BaseException:
                # _discard_pending_req_states: a request that failed (or whose client went away)
                # leaves no state behind.
                self._discard(obj.rid)
                raise
        else:
            async for response in self._handle_batch_request(obj, request):
                yield response

    def _init_req_state(self, obj: GenerateReqInput) -> None:
        if obj.rid in self.rid_to_state:
            raise ValueError(f"Duplicate request ID detected: {obj.rid}")
        self.rid_to_state[obj.rid] = ReqState(obj)

    def _discard(self, rid: str) -> None:
        state = self.rid_to_state.pop(rid, None)
        if state is not None and state.task is not None and not state.task.done():
            state.task.cancel()

    # _tokenize_one_request + _validate_one_request + _create_tokenized_object
    def _tokenize_one_request(self, obj: GenerateReqInput) -> Dict[str, Any]:
        if obj.input_embeds is not None:
            raise ValueError(
                "input_embeds is provided while disable_radix_cache is False. "
                "Please add `--disable-radix-cache` when you launch the server "
                "if you want to use input_embeds as inputs."
            )
        if obj.input_ids is None:
            raise ValueError(
                "The engine initialized with skip_tokenizer_init=True cannot "
                "accept text prompts. Please provide input_ids or re-initialize "
                "the engine with skip_tokenizer_init=False."
            )
        input_ids = list(obj.input_ids)
        if any(t >= VOCAB_SIZE for t in input_ids):
            raise ValueError(f"The input_ids {input_ids} contains values greater than the vocab size ({VOCAB_SIZE}).")
        self._validate_one_request(obj, input_ids)
        if obj.custom_logit_processor:
            raise ValueError(
                "The server is not configured to enable custom logit processor. "
                "Please set `--enable-custom-logit-processor` to enable this feature."
            )
        if self.preferred_sampling_params:
            sampling_kwargs = {**self.preferred_sampling_params, **obj.sampling_params}
        else:
            sampling_kwargs = obj.sampling_params
        # An unknown key raises TypeError here, as in SGLang: neither branch of
        # generate_request catches it.
        sampling_params = SamplingParams(**sampling_kwargs)
        sampling_params.normalize(self.tokenizer)
        sampling_params.verify(VOCAB_SIZE)
        if obj.return_logprob and obj.logprob_start_len >= len(input_ids):
            raise ValueError(
                f"logprob_start_len ({obj.logprob_start_len}) is superior or equal to the length "
                f"of the input ({len(input_ids)})."
            )
        return {"input_ids": input_ids, "sampling_params": sampling_params}

    def _validate_one_request(self, obj: GenerateReqInput, input_ids: List[int]) -> None:
        input_token_num = len(input_ids)
        if input_token_num >= self.context_len:
            raise ValueError(
                f"The input ({input_token_num} tokens) is longer than the "
                f"model's context length ({self.context_len} tokens)."
            )
        max_new_tokens = obj.sampling_params.get("max_new_tokens")
        if isinstance(max_new_tokens, int) and max_new_tokens + input_token_num > self.context_len:
            total_tokens = max_new_tokens + input_token_num
            raise ValueError(
                f"Requested token count exceeds the model's maximum context length "
                f"of {self.context_len} tokens. You requested a total of {total_tokens} "
                f"tokens: {input_token_num} tokens from the input messages and "
                f"{max_new_tokens} tokens for the completion. Please reduce the number "
                f"of tokens in the input messages or the completion to fit within the limit."
            )

    def _send_one_request(self, obj: GenerateReqInput, tokenized: Dict[str, Any]) -> None:
        state = self.rid_to_state[obj.rid]
        state.task = asyncio.get_running_loop().create_task(self._run_request(obj, state, tokenized))

    # The scheduler and the detokenizer's output, for one request.
    async def _run_request(self, obj: GenerateReqInput, state: ReqState, tokenized: Dict[str, Any]) -> None:
        args = self.server_args
        sp: SamplingParams = tokenized["sampling_params"]
        prompt: List[int] = tokenized["input_ids"]
        seq = list(prompt)
        # scheduler.py init_req_max_new_tokens: min(max_new_tokens or 1 << 30, max_req_len - len - 1)
        max_req_len = min(self.context_len - 1, MAX_TOTAL_NUM_TOKENS - 1)
        budget = min(sp.max_new_tokens if sp.max_new_tokens is not None else 1 << 30, max_req_len - len(prompt) - 1)
        cached = self.cache.match(prompt)
        stream_interval = sp.stream_interval or args.stream_interval
        delay = args.token_delay_ms / 1000.0
        out_ids: List[int] = []
        out_lps: List[List[Any]] = []
        out_tops: List[Any] = []
        sent = 0  # ids already sent (incremental mode)
        start = 0 if obj.logprob_start_len is None or obj.logprob_start_len < 0 else obj.logprob_start_len
        input_lps: List[List[Any]] = []
        input_tops: List[Any] = []
        if obj.return_logprob and obj.logprob_start_len is not None and obj.logprob_start_len >= 0:
            for i in range(start, len(prompt)):
                input_lps.append([None if i == 0 else logprob(prompt[:i], prompt[i]), prompt[i], None])
                if obj.top_logprobs_num:
                    input_tops.append(None if i == 0 else top_logprobs(prompt[:i], obj.top_logprobs_num))
        finish: Optional[Dict[str, Any]] = None

        def emit() -> None:
            nonlocal sent
            meta: Dict[str, Any] = {
                "id": obj.rid,
                "finish_reason": finish,
                "prompt_tokens": len(prompt),
                "weight_version": args.weight_version,
            }
            lo = sent if args.incremental_streaming_output and obj.stream else 0
            if obj.return_logprob:
                meta["input_token_logprobs"] = input_lps
                meta["output_token_logprobs"] = out_lps[lo:]
                if obj.top_logprobs_num:
                    meta["input_top_logprobs"] = input_tops
                    meta["output_top_logprobs"] = out_tops[lo:]
            meta["completion_tokens"] = len(out_ids)
            meta["cached_tokens"] = cached
            if finish is not None:
                meta["e2e_latency"] = time.time() - state.created_time
            state.out_list.append({"output_ids": out_ids[lo:], "meta_info": meta})
            sent = len(out_ids)
            state.event.set()

        try:
            await asyncio.sleep(delay)  # prefill
            while finish is None:
                if len(out_ids) >= budget:
                    finish = {"type": "length", "length": sp.max_new_tokens if sp.max_new_tokens is not None else budget}
                    break
                tok = next_token(seq)
                if obj.return_logprob:
                    out_lps.append([logprob(seq, tok), tok, None])
                    if obj.top_logprobs_num:
                        out_tops.append(top_logprobs(seq, obj.top_logprobs_num))
                seq.append(tok)
                out_ids.append(tok)
                self.last_receive_tstamp = time.time()
                min_ok = len(out_ids) > sp.min_new_tokens
                if min_ok and not sp.ignore_eos and tok == EOS_TOKEN_ID:
                    finish = {"type": "stop", "matched": tok}
                elif min_ok and sp.stop_token_ids and tok in sp.stop_token_ids:
                    finish = {"type": "stop", "matched": tok}
                elif len(out_ids) >= budget:
                    finish = {"type": "length", "length": sp.max_new_tokens if sp.max_new_tokens is not None else budget}
                if finish is not None:
                    break
                # stream_output_generation: which steps a running stream is sent on.
                if obj.stream:
                    n = len(out_ids)
                    if (n % stream_interval == 1) if stream_interval > 1 else (n % stream_interval == 0):
                        emit()
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            if not state.aborted:
                raise
            finish = {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}
        state.finished = True
        self.cache.insert(seq)
        emit()

    # tokenizer_manager.py _wait_one_response
    async def _wait_one_response(self, obj: GenerateReqInput, request: Optional[Request]):
        state = self.rid_to_state[obj.rid]
        while True:
            try:
                await asyncio.wait_for(state.event.wait(), timeout=4)
            except asyncio.TimeoutError:
                if request is not None and await request.is_disconnected():
                    self.abort_request(obj.rid)
                    raise ValueError(f"Request is disconnected from the client side (type 1). Abort request rid={obj.rid}")
                continue
            if not state.out_list:
                state.event.clear()
                continue
            if args_incremental(self, obj):
                outs = state.out_list
                state.out_list = []
                out = outs[-1] if len(outs) == 1 else _coalesce(outs)
            else:
                out = state.out_list[-1]
                state.out_list = []
            state.event.clear()
            if state.finished:
                # The finished request leaves rid_to_state before its answer is handed out.
                self.rid_to_state.pop(obj.rid, None)
                yield out
                break
            if obj.stream:
                yield out

    async def _handle_batch_request(self, obj: GenerateReqInput, request: Optional[Request]):
        generators = []
        rids = []
        for i in range(obj.batch_size):
            tmp = obj[i]
            self._init_req_state(tmp)
            tokenized = self._tokenize_one_request(tmp)
            self._send_one_request(tmp, tokenized)
            generators.append(self._wait_one_response(tmp, request))
            rids.append(tmp.rid)
        try:
            if not obj.stream:
                outputs = await asyncio.gather(*(gen.__anext__() for gen in generators))
                yield outputs
            else:
                rid_to_index = {rid: i for i, rid in enumerate(rids)}
                task_map = {asyncio.ensure_future(gen.__anext__()): gen for gen in generators}
                while task_map:
                    done, _ = await asyncio.wait(task_map.keys(), return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        gen = task_map.pop(task)
                        try:
                            result = task.result()
                        except StopAsyncIteration:
                            continue
                        result["index"] = rid_to_index[result["meta_info"]["id"]]
                        yield result
                        task_map[asyncio.ensure_future(gen.__anext__())] = gen
        except BaseException:
            for rid in rids:
                self._discard(rid)
            raise

    # tokenizer_manager.py abort_request + scheduler.py abort_request (prefix match)
    def abort_request(self, rid: str = "", abort_all: bool = False) -> None:
        if not abort_all and rid not in self.rid_to_state:
            return
        for r, state in list(self.rid_to_state.items()):
            if abort_all or r.startswith(rid):
                if state.task is not None and not state.task.done():
                    state.aborted = True
                    state.task.cancel()

    def create_abort_task(self, obj: GenerateReqInput) -> BackgroundTasks:
        # Abort the request if the client is disconnected.
        async def abort_request():
            await asyncio.sleep(2)
            if obj.is_single:
                self.abort_request(obj.rid)
            else:
                for rid in obj.rid:
                    self.abort_request(rid)

        background_tasks = BackgroundTasks()
        background_tasks.add_task(abort_request)
        return background_tasks

    def get_load(self) -> List[Dict[str, Any]]:
        running = sum(1 for s in self.rid_to_state.values() if not s.finished)
        return [{"dp_rank": 0, "num_reqs": running, "num_waiting_reqs": 0, "num_tokens": 0}]


def args_incremental(tm: TokenizerManager, obj: GenerateReqInput) -> bool:
    return tm.server_args.incremental_streaming_output and obj.stream


def _coalesce(outs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """_coalesce_streaming_chunks: deltas queued together become one."""
    out = dict(outs[-1])
    out["output_ids"] = [t for o in outs for t in o["output_ids"]]
    meta = dict(outs[-1]["meta_info"])
    for key in ("output_token_logprobs", "output_top_logprobs"):
        if key in meta:
            meta[key] = [x for o in outs for x in o["meta_info"].get(key, [])]
    out["meta_info"] = meta
    return out


# --------------------------------------------------------------------------- the HTTP server

app = FastAPI()
_tm: Optional[TokenizerManager] = None


@app.exception_handler(HTTPException)
async def http_exception_handler(request: Request, exc: HTTPException):
    # http_server.py validation_exception_handler(request, exc: HTTPException)
    return ORJSONResponse(
        content={"object": "error", "message": exc.detail, "type": str(exc.status_code), "param": None, "code": exc.status_code},
        status_code=exc.status_code,
    )


@app.exception_handler(RequestValidationError)
async def validation_exception_handler(request: Request, exc: RequestValidationError):
    # http_server.py validation_exception_handler(request, exc: RequestValidationError): 400, not 422.
    exc_str = str(exc)
    errors_str = str(exc.errors())
    message = f"{exc_str} {errors_str}" if errors_str and errors_str != exc_str else exc_str
    return ORJSONResponse(
        status_code=400,
        content={"object": "error", "message": message, "type": HTTPStatus.BAD_REQUEST.phrase, "param": None, "code": 400},
    )


@app.get("/health")
async def health() -> Response:
    """Check the health of the http server (http_server.py `health` at 9c0549b7; newer SGLang
    serves /health with health_generate, which takes a second: kept fast for the tests)."""
    if _tm.gracefully_exit:
        return Response(status_code=503)
    return Response(status_code=200)


@app.get("/health_generate")
async def health_generate(request: Request) -> Response:
    """Check the health of the inference server by generating one token."""
    if _tm.gracefully_exit:
        return Response(status_code=503)
    gri = GenerateReqInput(rid=f"HEALTH_CHECK_{time.time()}", input_ids=[0], sampling_params={"max_new_tokens": 1, "temperature": 0.0}, log_metrics=False)
    try:
        await asyncio.wait_for(_tm.generate_request(gri, request).__anext__(), timeout=HEALTH_CHECK_TIMEOUT)
        return Response(status_code=200)
    except Exception:
        return Response(status_code=503)


@app.get("/get_model_info")
@app.get("/model_info")
async def get_model_info():
    """Get the model information."""
    a = _tm.server_args
    return {
        "model_path": a.model_path,
        "tokenizer_path": a.tokenizer_path,
        "is_generation": True,
        "preferred_sampling_params": a.preferred_sampling_params,
        "weight_version": a.weight_version,
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
    }


@app.get("/get_weight_version")
async def get_weight_version():
    return {"weight_version": _tm.server_args.weight_version}


@app.get("/get_server_info")
@app.get("/server_info")
async def get_server_info():
    return {
        **dataclasses.asdict(_tm.server_args),
        "max_total_num_tokens": MAX_TOTAL_NUM_TOKENS,
        "max_req_input_len": _tm.server_args.context_length - 1,
        "internal_states": [{"last_gen_throughput": 0.0}],
        "version": "0.0.0-baton-realstack",
    }


@app.get("/get_load")
async def get_load():
    return _tm.get_load()


# fastapi implicitly converts json in the request to obj (dataclass)
@app.api_route("/generate", methods=["POST", "PUT"])
async def generate_request(obj: GenerateReqInput, request: Request):
    """Handle a generate request."""
    if obj.stream:

        async def stream_results() -> AsyncIterator[bytes]:
            try:
                async for out in _tm.generate_request(obj, request):
                    yield b"data: " + _dumps(out) + b"\n\n"
            except ValueError as e:
                out = _stream_error(e)
                logger.error(f"[http_server] Error: {e}")
                yield b"data: " + _dumps(out) + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(
            stream_results(),
            media_type="text/event-stream",
            background=_tm.create_abort_task(obj),
        )
    else:
        try:
            ret = await _tm.generate_request(obj, request).__anext__()
            return ret
        except ValueError as e:
            logger.error(f"[http_server] Error: {e}")
            return _create_error_response(e)


LEGACY_ERROR_FRAME = False


def _stream_error(e: ValueError) -> Dict[str, Any]:
    # SGLang since 2026-06 (PR #27451; shared/docs/sglang-wire.md, HS:836-853 at 8905cbd4) marks
    # the in-band refusal as the request's; before, the frame had only the message (0025436e).
    if LEGACY_ERROR_FRAME:
        return {"error": {"message": str(e)}}
    return {"error": {"message": str(e), "type": "invalid_request_error", "code": 400, "retryable": False}}


def _create_error_response(e):
    return ORJSONResponse({"error": {"message": str(e)}}, status_code=HTTPStatus.BAD_REQUEST)


@app.api_route("/flush_cache", methods=["GET", "POST"])
async def flush_cache():
    """Flush the radix cache."""
    success = not any(not s.finished for s in _tm.rid_to_state.values())
    if success:
        _tm.cache.clear()
    return Response(
        content="Cache flushed.\nPlease check backend logs for more details. "
        "(When there are running or waiting requests, the operation will not be performed.)\n",
        status_code=200 if success else HTTPStatus.BAD_REQUEST,
    )


@app.post("/abort_request")
async def abort_request(obj: AbortReq, request: Request):
    """Abort a request."""
    try:
        _tm.abort_request(rid=obj.rid, abort_all=obj.abort_all)
        return Response(status_code=200)
    except Exception as e:
        return _create_error_response(e)


@app.get("/v1/models", response_class=ORJSONResponse)
async def available_models():
    """Show available models. OpenAI-compatible endpoint."""
    a = _tm.server_args
    return {
        "object": "list",
        "data": [
            {
                "id": a.served_model_name,
                "object": "model",
                "created": int(_STARTED),
                "owned_by": "sglang",
                "root": a.served_model_name,
                "parent": None,
                "max_model_len": a.context_length,
            }
        ],
    }


_STARTED = time.time()


# --------------------------------------------------------------------------- main


def parse_args(argv: List[str]) -> ServerArgs:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--http", choices=["h11", "httptools"], default="h11")
    p.add_argument("--model-path", default=ServerArgs.model_path)
    p.add_argument("--weight-version", default="default")
    p.add_argument("--context-length", type=int, default=4096)
    p.add_argument("--stream-interval", type=int, default=1)
    p.add_argument("--incremental-streaming-output", action="store_true")
    p.add_argument("--preferred-sampling-params", default=None, help="a JSON object")
    p.add_argument("--token-delay-ms", type=float, default=5.0, help="time per generated token (and for prefill)")
    p.add_argument("--legacy-error-frame", action="store_true", help='stream refusals as {"error": {"message"}} only')
    p.add_argument("--log-level", default="warning")
    a = p.parse_args(argv)
    global LEGACY_ERROR_FRAME
    LEGACY_ERROR_FRAME = a.legacy_error_frame
    return ServerArgs(
        model_path=a.model_path,
        served_model_name=a.model_path,
        host=a.host,
        port=a.port,
        incremental_streaming_output=a.incremental_streaming_output,
        stream_interval=a.stream_interval,
        context_length=a.context_length,
        preferred_sampling_params=json.loads(a.preferred_sampling_params) if a.preferred_sampling_params else None,
        weight_version=a.weight_version,
        token_delay_ms=a.token_delay_ms,
        http=a.http,
        log_level=a.log_level,
    )


async def serve(args: ServerArgs) -> None:
    global _tm
    _tm = TokenizerManager(args)
    # Our own listening socket, so that port 0 gives a port we can print before serving.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    args.port = sock.getsockname()[1]
    # launch_server: uvicorn.run(app, host=..., port=..., log_level=..., timeout_keep_alive=5,
    # loop="uvloop"). Debian has no uvloop: asyncio's loop; the HTTP parser is chosen per run.
    config = uvicorn.Config(app, log_level=args.log_level, timeout_keep_alive=5, loop="asyncio", http=args.http)
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if server.started:
        print(f"listening on http://{args.host}:{args.port} (uvicorn --http {args.http})", flush=True)
    await task


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(serve(parse_args(sys.argv[1:])))
