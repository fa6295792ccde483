"""Writes the high-motion test video the WebRTC sender streams: a raw Y4M file (the YUV4MPEG2
format that Chromium's fake capture device reads with --use-file-for-fake-video-capture and loops).

The content is chosen so that the VP8 encoder needs many Mbit/s at any bitrate the path allows,
and so the flow stays limited by congestion control rather than by what the encoder has to say:
a field of random 8x8 luma/chroma blocks pans diagonally across the frame (every block moves every
frame, by 5-6 pixels at 640x480, 30 fps), and the low four bits of every luma sample are fresh
random values each frame, so every macroblock carries new detail that motion compensation cannot
predict. The block field is a torus that pans exactly once across the frame in each direction
over the file's length, so the loop has no seam and the video no scene cut: its complexity is the
same in every frame, and the encoder's bursts come from its rate, not from the content.
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
NOISE_MASK = 0x0F
"""Fresh random values in the low four bits of each luma sample (16 grey levels of noise)."""
SEED = 20180711


def block_texture(rng: random.Random, width: int, height: int) -> bytes:
    """A width x height plane of random BLOCK_PX x BLOCK_PX blocks."""
    cols = (width + BLOCK_PX - 1) // BLOCK_PX
    rows = []
    for _ in range((height + BLOCK_PX - 1) // BLOCK_PX):
        row = bytes(b for b in rng.randbytes(cols) for _ in range(BLOCK_PX))[:width]
        rows.extend([row] * BLOCK_PX)
    return b"".join(rows[:height])


def panned(plane: bytes, width: int, height: int, x: int, y: int) -> bytes:
    """The plane shifted by (x, y) with wrap-around: the window at (x, y) on a torus."""
    rows = (plane[((y + r) % height) * width:((y + r) % height + 1) * width] for r in range(height))
    return b"".join(row[x:] + row[:x] for row in rows)


def with_noise(rng: random.Random, plane: bytes) -> bytes:
    noise = int.from_bytes(rng.randbytes(len(plane)), "little") & int.from_bytes(bytes([NOISE_MASK]) * len(plane), "little")
    return (int.from_bytes(plane, "little") ^ noise).to_bytes(len(plane), "little")


def write_video(out: Path, width: int, height: int, fps: int, seconds: float) -> None:
    rng = random.Random(SEED)
    cw, ch = width // 2, height // 2
    luma = block_texture(rng, width, height)
    chroma_u = block_texture(rng, cw, ch)
    chroma_v = block_texture(rng, cw, ch)
    frames = max(1, round(fps * seconds))
    tmp = out.with_name(out.name + ".part")
    with open(tmp, "wb") as f:
        f.write(f"YUV4MPEG2 W{width} H{height} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for i in range(frames):
            # One full turn of the torus per loop; even offsets keep chroma aligned with luma.
            x = round(i * width / frames) // 2 * 2 % width
            y = round(i * height / frames) // 2 * 2 % height
            f.write(b"FRAME\n")
            f.write(with_noise(rng, panned(luma, width, height, x, y)))
            f.write(panned(chroma_u, cw, ch, x // 2, y // 2))
            f.write(panned(chroma_v, cw, ch, x // 2, y // 2))
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
