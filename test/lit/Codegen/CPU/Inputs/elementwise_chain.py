"""Prints @chain: N elementwise linalg.generics (one arith.mulf each: squares, which nothing folds), each
reading the previous one's result."""

import sys

n = int(sys.argv[1])
lines = ["#id = affine_map<(d0) -> (d0)>",
         "func.func @chain(%a: tensor<8xf32>) -> tensor<8xf32> {",
         "  %e = tensor.empty() : tensor<8xf32>"]
value = "%a"
for i in range(n):
    lines += [f"  %v{i} = linalg.generic {{indexing_maps = [#id, #id], iterator_types = "
              f"[\"parallel\"]}} ins({value} : tensor<8xf32>) outs(%e : tensor<8xf32>) {{",
              "  ^bb0(%x: f32, %o: f32):",
              "    %y = arith.mulf %x, %x : f32",
              "    linalg.yield %y : f32",
              "  } -> tensor<8xf32>"]
    value = f"%v{i}"
lines += [f"  return {value} : tensor<8xf32>", "}"]
print("\n".join(lines))
