// The benchmark MLP (shared/bench/make_models.py) at graph level:
// Linear 1024->4096, GELU, Linear 4096->4096, GELU, Linear 4096->1024, batch 8.
// Weights arrive as arguments (already transposed to [in, out]).
module attributes {sits.target = #sits.target<"cpu">} {
  func.func @mlp(%x: tensor<8x1024xf32>,
                 %w1: tensor<1024x4096xf32>, %b1: tensor<4096xf32>,
                 %w2: tensor<4096x4096xf32>, %b2: tensor<4096xf32>,
                 %w3: tensor<4096x1024xf32>, %b3: tensor<1024xf32>) -> tensor<8x1024xf32> {
    %h1 = sits.matmul %x, %w1 bias(%b1)
        : (tensor<8x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
    %a1 = sits.activation <gelu> %h1 : tensor<8x4096xf32>
    %h2 = sits.matmul %a1, %w2 bias(%b2)
        : (tensor<8x4096xf32>, tensor<4096x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
    %a2 = sits.activation <gelu> %h2 : tensor<8x4096xf32>
    %y = sits.matmul %a2, %w3 bias(%b3)
        : (tensor<8x4096xf32>, tensor<4096x1024xf32>, tensor<1024xf32>) -> tensor<8x1024xf32>
    return %y : tensor<8x1024xf32>
  }
}
