#!/usr/bin/env python3
"""Writes the site's link-preview images (site/assets/og-<page type>.png, 1200x630) and the
maskable app icon (site/assets/icon-maskable-512.png), with Python's standard library only
(zlib for the PNG stream). Each preview carries the Headroom mark (the icon's three bars) and a
pictogram of its page type, with no text, so one image serves every language.

Run from the repository root: python3 scripts/og-images.py
"""
import struct
import zlib
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "site" / "assets"

BLUE = (0x0B, 0x5C, 0xAD)
LIGHT = (0x9F, 0xD0, 0xFF)
WHITE = (0xFF, 0xFF, 0xFF)
GREEN = (0x8F, 0xE0, 0xAB)
AMBER = (0xF5, 0xCF, 0x7A)
RED = (0xFF, 0xAA, 0xAA)
SEGMENTS = [(0xFF, 0xFF, 0xFF), (0xD9, 0x82, 0x2B), (0x2B, 0x9D, 0x6B), (0xB0, 0x4A, 0x9B), (0x5A, 0xA9, 0xE6)]


class Canvas:
    def __init__(self, w, h, bg):
        self.w, self.h = w, h
        self.px = [bytearray(bytes(bg) * w) for _ in range(h)]

    def rect(self, x, y, w, h, color, r=0):
        """A filled rectangle with corner radius r."""
        for yy in range(max(0, y), min(self.h, y + h)):
            row = self.px[yy]
            for xx in range(max(0, x), min(self.w, x + w)):
                if r:
                    cx = x + r if xx < x + r else (x + w - r - 1 if xx > x + w - r - 1 else xx)
                    cy = y + r if yy < y + r else (y + h - r - 1 if yy > y + h - r - 1 else yy)
                    if (xx - cx) ** 2 + (yy - cy) ** 2 > r * r:
                        continue
                row[3 * xx:3 * xx + 3] = bytes(color)

    def circle(self, cx, cy, r, color):
        self.rect(cx - r, cy - r, 2 * r, 2 * r, color, r)

    def png(self, path):
        raw = b"".join(b"\x00" + bytes(row) for row in self.px)

        def chunk(kind, data):
            c = struct.pack(">I", len(data)) + kind + data
            return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

        data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
        data += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
        path.write_bytes(data)


def mark(c, x, y, s):
    """The icon's bars at scale s (the icon is drawn on a 512 grid)."""
    c.rect(x + int(96 * s), y + int(280 * s), int(72 * s), int(136 * s), WHITE, int(10 * s))
    c.rect(x + int(220 * s), y + int(200 * s), int(72 * s), int(216 * s), WHITE, int(10 * s))
    c.rect(x + int(344 * s), y + int(96 * s), int(72 * s), int(320 * s), LIGHT, int(10 * s))
    c.rect(x + int(80 * s), y + int(432 * s), int(352 * s), int(16 * s), WHITE, int(8 * s))


def calculator(c):
    # A stacked memory bar with the card's edge marked.
    x = 560
    for i, w in enumerate([220, 120, 90, 60, 40]):
        c.rect(x, 270, w, 90, SEGMENTS[i])
        x += w
    c.rect(560 + 470, 240, 10, 150, WHITE, 4)


def claims(c):
    # Verdict badges: verified, qualified, contradicted.
    for i, col in enumerate([GREEN, AMBER, RED]):
        c.rect(580, 170 + i * 110, 180, 64, col, 32)
        c.rect(790, 188 + i * 110, 280, 28, WHITE, 14)


def gpus(c):
    # A table: a header row and rows.
    for row in range(5):
        for col in range(3):
            color = LIGHT if row == 0 else WHITE
            c.rect(570 + col * 170, 150 + row * 72, 150, 48, color, 8)


def guides(c):
    # A page with lines of text.
    c.rect(600, 110, 420, 420, WHITE, 24)
    for i, w in enumerate([300, 340, 260, 330, 200, 310]):
        c.rect(650, 170 + i * 56, w, 22, BLUE if i else LIGHT, 11)


def probe(c):
    # A chip with pins.
    c.rect(680, 190, 260, 260, WHITE, 24)
    c.rect(740, 250, 140, 140, LIGHT, 12)
    for i in range(5):
        c.rect(700 + i * 50, 150, 20, 40, WHITE)
        c.rect(700 + i * 50, 450, 20, 40, WHITE)
        c.rect(640, 210 + i * 50, 40, 20, WHITE)
        c.rect(940, 210 + i * 50, 40, 20, WHITE)


def allocator(c):
    # A segment map: rows of segments, blocks in use and free.
    for row, blocks in enumerate([[160, 60, 120], [90, 200], [140, 40, 70, 60], [260]]):
        x = 580
        for i, w in enumerate(blocks):
            c.rect(x, 170 + row * 80, w - 8, 56, SEGMENTS[(row + i) % 5] if i % 2 == 0 else LIGHT, 6)
            x += w
    c.rect(1060, 150, 10, 330, WHITE, 4)


def about(c):
    c.circle(810, 320, 170, WHITE)
    c.circle(810, 230, 26, BLUE)
    c.rect(786, 285, 48, 150, BLUE, 12)


def home(c):
    calculator(c)


def main():
    for name, draw in [("home", home), ("calculator", calculator), ("claims", claims), ("gpus", gpus), ("guides", guides), ("allocator", allocator), ("probe", probe), ("about", about)]:
        c = Canvas(1200, 630, BLUE)
        mark(c, 40, 60, 0.95)
        draw(c)
        c.png(OUT / f"og-{name}.png")
    # Maskable icon: the mark inside the central safe zone (80 %), the background to the edges.
    c = Canvas(512, 512, BLUE)
    mark(c, 51, 51, 0.8)
    c.png(OUT / "icon-maskable-512.png")


if __name__ == "__main__":
    main()
