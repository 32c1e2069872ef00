"""Chat in the terminal with any GGUF language model: the file's chat template, its end of turn, the
answer streamed as it comes.

    python examples/chat.py MODEL.gguf [--system "You are terse."] [--temperature 0.7] [--max-tokens 256]

Type a line and press Enter; an empty line or Ctrl+D ends the chat. Each answer is generated after the
whole conversation so far, rendered by the file's chat template (``tokenizer.chat_template``), and stops
at the end of the assistant's turn (the vocabulary's end-of-generation tokens) or after
``--max-tokens``. When the conversation outgrows the model's context, its oldest turns are dropped
(the system prompt is kept).
"""
from __future__ import annotations

import argparse
import sys

import pyggml_opt as pgo


def prompt_ids(tok: pgo.text.GGUFTokenizer, messages: list[dict], context: int, room: int):
    """The conversation's ids with the assistant's turn opened, its oldest turns dropped until ``room``
    new tokens fit in the context."""
    system = messages[:1] if messages and messages[0]["role"] == "system" else []
    turns = messages[len(system):]
    while True:
        ids = tok.apply_chat_template(system + turns, add_generation_prompt=True)
        if len(ids) + room <= context or len(turns) <= 1:
            return ids[-(context - 1):]  # at least one new token fits
        turns = turns[2:] if len(turns) > 2 else turns[-1:]  # a user turn and its answer


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", help="a GGUF language model with a chat template")
    ap.add_argument("--system", default=None, help="a system prompt")
    ap.add_argument("--temperature", type=float, default=0.7, help="0: always the most likely token")
    ap.add_argument("--top-k", type=int, default=40)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--max-tokens", type=int, default=256, help="at most this many tokens an answer")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)

    model = pgo.load(args.path)
    tok = pgo.text.GGUFTokenizer(model.file_keys)
    if tok.chat_template is None:
        sys.exit(f"{args.path} has no chat template (tokenizer.chat_template): it is not an instruction-tuned model")
    context = model.input_shape[0]
    messages = [{"role": "system", "content": args.system}] if args.system else []
    interactive = sys.stdin.isatty()
    while True:
        try:
            line = input("> ") if interactive else sys.stdin.readline()
        except EOFError:
            break
        line = line.rstrip("\n")
        if not line.strip():
            break
        messages.append({"role": "user", "content": line})
        ids = prompt_ids(tok, messages, context, min(args.max_tokens, context - 1))
        room = max(1, min(args.max_tokens, context - len(ids)))
        answer = []
        for piece in model.generate(ids, room, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                                    seed=args.seed, tokenizer=tok, stream=True, n_threads=args.threads):
            print(piece, end="", flush=True)
            answer.append(piece)
        print(flush=True)
        messages.append({"role": "assistant", "content": "".join(answer)})


if __name__ == "__main__":
    main()
