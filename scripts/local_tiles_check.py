#!/usr/bin/env python3
"""Checks the local-order encoder's tile arithmetic on the CPU (src/cuda/conv_memory.cu:
local_geometry, local_tile_of, local_rows and the store masks of local_compute), for layer
geometries that include the doctest sanitize case's: every output frame of every row is written
by exactly one tile, and every tile's rows start at one offset within the alignment.

    python3 scripts/local_tiles_check.py

Keep it in step with local_geometry when the tile rules change; it ran for log step 123 in
docs/performance.md, when no GPU was lent.
"""


def geometry(cout_g, out, y_cs, y_bs, y_base, K=16, set_c=0, set_f=0, set_align=0):
    align = min(set_align, 32) if set_align > 0 else 8
    while align & (align - 1):
        align &= align - 1
    period = 1
    while ((y_cs % align + align) * period) % align:
        period *= 2
    tile_c = max(4, min(256, set_c)) if set_c > 0 else (32 if K <= 16 else 64)

    def tiles_of(per):
        rows = (cout_g + per - 1) // per
        c = (min(rows, tile_c) + 3) // 4 * 4
        return c, per * ((rows + c - 1) // c)

    if tiles_of(period)[1] > tiles_of(1)[1]:
        align = period = 1
    C, c_tiles = tiles_of(period)
    max_shift = 0
    if align > 1:
        shared = period == 1 and y_bs % align == 0 and (cout_g * y_cs) % align == 0
        max_shift = (y_base & (align - 1)) if shared else align - 1
    want_f = set_f if set_f > 0 else 4
    F = 4 if want_f >= 4 and K <= 16 else (2 if want_f >= 2 else 1)
    frames = 256 * F
    t_tiles = (out + max_shift + frames - 1) // frames
    return dict(align=align, period=period, C=C, frames=frames, t_tiles=t_tiles, c_tiles=c_tiles)


def check(cout_g, groups, batch, out, y_cs, y_bs, y_base, **kw):
    """y_base: the output view's first float, as an offset from a 128-byte line."""
    g = geometry(cout_g, out, y_cs, y_bs, y_base, **kw)
    P, C, W, A = g["period"], g["C"], g["frames"], g["align"]
    lg = P.bit_length() - 1
    written = {}
    for tile in range(g["t_tiles"] * g["c_tiles"] * groups * batch):
        r1, tt = divmod(tile, g["t_tiles"])
        r2, ct = divmod(r1, g["c_tiles"])
        o0 = (ct & (P - 1)) + (((ct >> lg) * C) << lg)
        b, gr = divmod(r2, groups)
        s = (y_base + b * y_bs + (gr * cout_g + o0) * y_cs) & (A - 1)
        f0 = tt * W - s
        left = cout_g - o0
        rows = 0 if left <= 0 else min(C, (left + P - 1) >> lg)
        for i in range(rows):
            o = o0 + (i << lg)
            assert (y_base + b * y_bs + (gr * cout_g + o) * y_cs) & (A - 1) == s
            for t in range(max(0, f0), min(out, f0 + W)):
                key = (b, gr, o, t)
                written[key] = written.get(key, 0) + 1
    assert len(written) == batch * groups * cout_g * out, "an output is not written"
    assert all(v == 1 for v in written.values()), "an output is written twice"
    return g


def main():
    # (in, out, K, stride, padding, dilation, groups, batch, frames, strided view): the
    # sanitize case's layers (tests/test_cuda.cpp, for_each_encoder_layer); a strided view has
    # channel stride frames + 7 and starts 2 floats into its buffer, as run_config makes it.
    layers = [(1, 512, 16, 8, 0, 1, 1, 2, 12001, True), (1, 70, 20, 10, 5, 1, 1, 2, 4000, False),
              (1, 48, 8, 4, 0, 2, 1, 3, 4001, True), (3, 60, 7, 3, 4, 2, 3, 2, 1500, True),
              (1, 32, 1, 1, 0, 1, 1, 2, 700, False), (1, 256, 32, 16, 0, 1, 1, 2, 8011, False),
              (1, 128, 3, 1, 1, 1, 1, 1, 2501, True), (1, 40, 4, 6, 0, 1, 1, 2, 999, False),
              (1, 100, 5, 3, 2, 1, 1, 2, 777, True), (1, 64, 16, 8, 0, 1, 1, 5, 1500, False),
              (2, 36, 12, 2, 0, 1, 2, 2, 6000, False), (1, 96, 26, 13, 0, 1, 1, 2, 5000, True),
              (1, 20, 23, 5, 11, 1, 1, 1, 3000, False), (1, 70, 12, 4, 8, 1, 1, 2, 6000, False),
              (2, 64, 8, 8, 0, 1, 2, 3, 8192, True)]
    # (alignment, tile channels, frames per lane): the sanitize case's rounds.
    rounds = [(0, 32, 1), (0, 16, 2), (0, 8, 4), (0, 32, 4), (0, 64, 2), (1, 32, 4), (32, 16, 4),
              (16, 16, 2)]
    aligned = 0
    for align, c, f in rounds:
        for cin, cout, K, s, p, d, groups, n, frames, strided in layers:
            out = (frames + 2 * p - d * (K - 1) - 1) // s + 1
            y_cs, y_bs, base = (out + 7, (cout + 1) * (out + 7), 2) if strided else (out, cout * out, 0)
            g = check(cout // groups, groups, n, out, y_cs, y_bs, base, K=K, set_c=c, set_f=f,
                      set_align=align)
            aligned += g["align"] > 1
    # enc_tasnet and other long rows, contiguous and at odd offsets.
    for cout, batch, out, base in [(512, 2, 16383, 0), (512, 2, 16384, 5), (1024, 1, 16381, 3),
                                   (384, 1, 999, 0), (260, 2, 777, 0), (128, 2, 16382, 1)]:
        for kw in [{}, {"set_align": 32}, {"set_align": 16, "set_f": 2}, {"K": 20}]:
            check(cout, 1, batch, out, out, cout * out, base, **kw)
    # The sanitize case asserts this count (tests/test_cuda.cpp).
    print(f"ok: every output written once; {aligned} of the sanitize case's launches aligned")


if __name__ == "__main__":
    main()
