"""``python -m pyggml_opt.finetune BASE.gguf --data DATA -o adapter.gguf``: the command line of
``pyggml_opt.finetune.finetune`` (``--help`` is its manual). Bad input ends with a message and exit
status 2 before anything trains; Ctrl+C ends with status 130, the last checkpoint whole."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from . import finetune

DESCRIPTION = """\
Fine-tune a GGUF language model on your JSONL data with LoRA (or every weight, --full) on the CPU,
and write the adapter as llama.cpp's LoRA GGUF: llama-cli -m BASE.gguf --lora adapter.gguf, or
llama-cpp-python's Llama(BASE.gguf, lora_path="adapter.gguf"). The base file is only ever read; its
weights stay as they are (quantized ones too), frozen, and its own tokenizer and chat template read
the data."""

EPILOG = """\
data:
  A JSONL file, or a directory holding train.jsonl and optionally valid.jsonl (validated after every
  epoch) and test.jsonl (as MLX-LM lays it out). One JSON object per line, one format per file:
    {"text": "..."}                                   every token is trained
    {"prompt": "...", "completion": "..."}            the completion is trained (rendered as a user /
                                                      assistant exchange by the model's chat template)
    {"messages": [{"role": "user", "content": "..."},
                  {"role": "assistant", "content": "..."}]}   the assistant's turns are trained
  Roles: system, developer, user, assistant, tool. A bad line stops the command before training,
  naming the file and the line.

what is trained:
  Without --no-mask-prompt, only the completions / assistant turns count in the loss (their tokens,
  and the end-of-turn token after them). Each optimizer step minimises the mean loss over the trained
  tokens of its --batch-size rows. Examples longer than --max-seq-length tokens are truncated (or
  skipped: --skip-long), and the counts printed.

examples:
  python -m pyggml_opt.finetune model.gguf --data data/ -o adapter.gguf
  python -m pyggml_opt.finetune model.gguf --data chats.jsonl --valid held_out.jsonl --epochs 3 \\
      --lora-rank 16 --lora-alpha 32 --targets attn_q attn_v --pack --checkpoint ckpt.gguf
  python -m pyggml_opt.finetune model.gguf --data data/ --resume ckpt.gguf --epochs 5
  python -m pyggml_opt.finetune model-f16.gguf --data data/ --full -o tuned.gguf

exit status: 0 done, 2 bad input (nothing trained), 130 interrupted (Ctrl+C)."""


def parser() -> argparse.ArgumentParser:
    """The command line's arguments (flags named as MLX-LM's ``mlx_lm.lora`` where they mean the same)."""
    p = argparse.ArgumentParser(prog="python -m pyggml_opt.finetune", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("base", metavar="BASE.gguf", help="the language model to fine-tune (a llama.cpp GGUF file)")
    p.add_argument("--data", required=True, metavar="DIR_OR_FILE", help="the training data (see data: below)")
    p.add_argument("--valid", metavar="FILE", help="validation data (default: the data directory's valid.jsonl)")
    p.add_argument("-o", "--output", "--adapter-path", dest="output", default="adapter.gguf", metavar="FILE",
                   help="where to write the adapter (with --full: the model) (default: %(default)s)")
    lora = p.add_argument_group("LoRA")
    lora.add_argument("--lora-rank", type=int, default=8, help="the adapters' rank (default: %(default)s)")
    lora.add_argument("--lora-alpha", type=float, default=16.0,
                      help="scale alpha / rank, as PEFT's lora_alpha (default: %(default)s)")
    lora.add_argument("--lora-dropout", type=float, default=0.0,
                      help="dropout on the adapters' input in training (default: %(default)s)")
    lora.add_argument("--targets", nargs="+", default=["all-linear"], metavar="NAME",
                      help="the projections to adapt: llama.cpp's names (attn_q attn_k attn_v attn_output ffn_gate "
                           "ffn_up ffn_down), PEFT's (q_proj ... down_proj) or all-linear (default)")
    lora.add_argument("--full", action="store_true",
                      help="train every weight instead of adapters (F16 / BF16 ones as float32 copies; quantized "
                           "bases are refused); -o gets the whole model, float32")
    lora.add_argument("--fuse", metavar="OUT.gguf", help="also write base + adapter merged into one GGUF")
    train = p.add_argument_group("training")
    train.add_argument("--epochs", type=int, default=1, help="passes over the data (default: %(default)s)")
    train.add_argument("--batch-size", type=int, default=4, help="rows per optimizer step (default: %(default)s)")
    train.add_argument("--learning-rate", type=float, default=1e-4, help="AdamW's (default: %(default)s)")
    train.add_argument("--max-seq-length", type=int, default=2048,
                       help="the most tokens of an example, at most the model's context + 1 (default: %(default)s)")
    train.add_argument("--skip-long", action="store_true", help="skip longer examples instead of truncating them")
    mask = train.add_mutually_exclusive_group()
    mask.add_argument("--mask-prompt", dest="mask_prompt", action="store_true", default=True,
                      help="train on the completions / assistant turns only (the default)")
    mask.add_argument("--no-mask-prompt", dest="mask_prompt", action="store_false", help="train on every token")
    train.add_argument("--pack", action="store_true",
                       help="pack several examples into each row (none attends to another): faster for short ones")
    train.add_argument("--cache", metavar="DIR",
                       help="tokenize the data into files in DIR once (reused while the data, tokenizer and options "
                            "are the same) and train from their mappings: data larger than memory")
    train.add_argument("--seed", type=int, default=0, help="the adapters' initialisation and the shuffling")
    train.add_argument("--threads", type=int, default=None, help="CPU threads (default: the cores)")
    ckpt = p.add_argument_group("checkpoints")
    ckpt.add_argument("--checkpoint", metavar="FILE",
                      help="write weights and optimizer state here after every epoch ({epoch} allowed)")
    ckpt.add_argument("--resume", metavar="CHECKPOINT", help="continue exactly from a --checkpoint file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default sys.argv[1:]); the exit status."""
    p = parser()
    a = p.parse_args(argv)
    try:
        finetune(a.base, a.data, valid=a.valid, output=a.output, lora_rank=a.lora_rank, lora_alpha=a.lora_alpha,
                 lora_dropout=a.lora_dropout, targets=a.targets[0] if a.targets == ["all-linear"] else a.targets,
                 full=a.full, epochs=a.epochs, batch_size=a.batch_size, learning_rate=a.learning_rate,
                 mask_prompt=a.mask_prompt, max_seq_length=a.max_seq_length,
                 too_long="skip" if a.skip_long else "truncate", pack=a.pack, fuse=a.fuse, checkpoint=a.checkpoint,
                 resume=a.resume, cache=a.cache, seed=a.seed, n_threads=a.threads, verbose=0 if a.quiet else 1)
    except (ValueError, TypeError) as exc:
        p.exit(2, f"{p.prog}: error: {exc}\n")
    except KeyboardInterrupt:
        where = f"; the last checkpoint is {a.checkpoint}" if a.checkpoint else ""
        print(f"\ninterrupted{where}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
