"""GPT-2's byte-level alphabet: the printable character that stands for each byte in the text of a
byte-level BPE token (tokenizer model ``gpt2``), and the way back from a token's text to its bytes."""
from __future__ import annotations


def _byte_decoder() -> dict[str, int]:
    """GPT-2's alphabet: the character standing for each byte in a byte-level BPE token's text."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


BYTES = _byte_decoder()  # character -> byte
BYTE_CHARS = {b: c for c, b in BYTES.items()}  # byte -> character


def byte_level_bytes(text: str) -> bytes:
    """A byte-level BPE token's bytes (llama_decode_text: a character outside GPT-2's alphabet as
    llama.cpp writes it)."""
    out = bytearray()
    for c in text:
        if c in BYTES:
            out.append(BYTES[c])
        else:
            out += b"[UNK_BYTE_0x" + c.encode().hex().encode() + text.encode() + b"]"
    return bytes(out)
