"""Writes the high-motion test video the WebRTC sender streams: a raw Y4M file (the YUV4MPEG2
format that Chromium's fake capture device reads with --use-file-for-fake-video-capture and loops).

The content is chosen so that the VP8 encoder needs many Mbit/s at any bitrate the path allows,
and so the flow stays limited by congestion control rather than by what the encoder has to say:
a field of random 8x8 luma/chroma blocks pans diagonally by several pixels per frame (every block
moves and edges cross block boundaries, so motion compensation leaves residuals), and fresh
per-frame noise in the low four bits of every luma sample makes every macroblock carry new detail.
It is deterministic (seeded), so every machine streams the same video, and stdlib-only, so setup
needs nothing but Python: bytes are composed with slicing and whole-frame integer XOR, which run
at C speed.

Y4M format: a stream header `YUV4MPEG2 W.. H.. F30:1 Ip A1:1 C420jpeg`, then per frame `FRAME`
and the planar 4:2:0 samples (Y at full size, then U and V at half width and height).

    python make_video.py OUT.y4m [--width 640 --height 480 --fps 30 --seconds 4]
"""
from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

BLOCK_PX = 8
"""Side of the random blocks: VP8's transform size, so every block edge is a real edge to code."""
PAN_PX_PER_FRAME = (7, 3)
"""Diagonal motion of the block field (x, y) in pixels per frame."""
NOISE_MASK = 0x0F
"""Fresh noise in the low four bits of each luma sample, ±8 grey levels around the texture."""
SEED = 20180711


def block_texture(rng: random.Random, width: int, height: int) -> bytes:
    """A width x height plane of random BLOCK_PX x BLOCK_PX blocks."""
    cols = (width + BLOCK_PX - 1) // BLOCK_PX
    rows = []
    for _ in range((height + BLOCK_PX - 1) // BLOCK_PX):
        row = bytes(b for b in rng.randbytes(cols) for _ in range(BLOCK_PX))[:width]
        rows.extend([row] * BLOCK_PX)
    return b"".join(rows[:height])


def window(plane: bytes, plane_width: int, x: int, y: int, width: int, height: int) -> bytes:
    """The width x height part of a plane whose top-left corner is (x, y)."""
    return b"".join(plane[(y + r) * plane_width + x:(y + r) * plane_width + x + width] for r in range(height))


def with_noise(rng: random.Random, plane: bytes) -> bytes:
    noise = int.from_bytes(rng.randbytes(len(plane)), "little") & int.from_bytes(bytes([NOISE_MASK]) * len(plane), "little")
    return (int.from_bytes(plane, "little") ^ noise).to_bytes(len(plane), "little")


def write_video(out: Path, width: int, height: int, fps: int, seconds: float) -> None:
    rng = random.Random(SEED)
    # The textures are twice the frame so a frame-sized window can pan across them; the pan
    # wraps, which adds a scene cut each time it does.
    luma = block_texture(rng, 2 * width, 2 * height)
    cw, ch = width // 2, height // 2
    chroma_u = block_texture(rng, 2 * cw, 2 * ch)
    chroma_v = block_texture(rng, 2 * cw, 2 * ch)
    tmp = out.with_name(out.name + ".part")
    with open(tmp, "wb") as f:
        f.write(f"YUV4MPEG2 W{width} H{height} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for i in range(round(fps * seconds)):
            x = (PAN_PX_PER_FRAME[0] * i) % width // 2 * 2
            y = (PAN_PX_PER_FRAME[1] * i) % height // 2 * 2
            f.write(b"FRAME\n")
            f.write(with_noise(rng, window(luma, 2 * width, x, y, width, height)))
            f.write(window(chroma_u, 2 * cw, x // 2, y // 2, cw, ch))
            f.write(window(chroma_v, 2 * cw, x // 2, y // 2, cw, ch))
    os.replace(tmp, out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Write the WebRTC scheme's high-motion Y4M test video.")
    parser.add_argument("out", type=Path, help="the .y4m file to write")
    parser.add_argument("--width", type=int, default=640, help="pixels, even (default 640)")
    parser.add_argument("--height", type=int, default=480, help="pixels, even (default 480)")
    parser.add_argument("--fps", type=int, default=30, help="frames per second (default 30)")
    parser.add_argument("--seconds", type=float, default=4.0, help="length; Chromium loops it (default 4)")
    args = parser.parse_args(argv)
    if args.width < 16 or args.height < 16 or args.width % 2 or args.height % 2:
        parser.error("--width and --height must be even and at least 16 (4:2:0 chroma is half size)")
    if args.fps < 1 or args.seconds <= 0:
        parser.error("--fps must be at least 1 and --seconds positive")
    write_video(args.out, args.width, args.height, args.fps, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
