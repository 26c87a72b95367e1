"""A line chart as a PNG file, with nothing but the standard library and NumPy (the samples
need no plotting package): `line_chart(path, values)` draws the values left to right, scaled
to the picture's height, on a white background with a light grid."""
import struct
import zlib

import numpy as np


def _chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def write_png(path, rgb):
    """Write an (height, width, 3) uint8 array as an 8-bit RGB PNG."""
    height, width, _ = rgb.shape
    rows = b"".join(b"\x00" + rgb[y].tobytes() for y in range(height))   # filter 0 per row
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
                + _chunk(b"IDAT", zlib.compress(rows, 9)) + _chunk(b"IEND", b""))


def line_chart(path, values, width=640, height=360, margin=20):
    """Draw `values` as a polyline (blue) over a grid (grey); returns the picture array."""
    values = np.asarray(values, np.float64)
    image = np.full((height, width, 3), 255, np.uint8)
    image[margin:height - margin:40, margin:width - margin] = 225     # horizontal grid lines
    image[margin:height - margin, margin:width - margin:64] = 225     # vertical grid lines
    low, high = float(values.min()), float(values.max())
    span = high - low or 1.0
    xs = margin + np.arange(len(values)) * (width - 2 * margin - 1) / max(len(values) - 1, 1)
    ys = height - margin - 1 - (values - low) / span * (height - 2 * margin - 1)
    for (x0, y0), (x1, y1) in zip(zip(xs[:-1], ys[:-1]), zip(xs[1:], ys[1:])):
        steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for t in np.linspace(0.0, 1.0, steps):
            x, y = int(round(x0 + t * (x1 - x0))), int(round(y0 + t * (y1 - y0)))
            image[max(y - 1, 0):y + 2, max(x - 1, 0):x + 2] = (31, 119, 180)
    write_png(path, image)
    return image
