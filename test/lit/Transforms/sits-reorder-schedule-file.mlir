// The schedule file sits-reorder writes (format:
// passes/Analysis/ScheduleFormat.md), here for a V100: header, target
// figures from the table, groups in order, ops with estimated times,
// tensors with arena offsets, weights, the precision report copied
// verbatim, and the memory summary.
//
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-reorder{target=v100 profile=memory schedule-file=%t.sits})' -o /dev/null
// RUN: FileCheck %s --input-file=%t.sits
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-reorder{target=v100 schedule-file=-})' -o /dev/null | FileCheck %s --check-prefix=STDOUT

//      CHECK: sits-schedule 1
// CHECK-NEXT: # Written by sits-reorder; format: passes/Analysis/ScheduleFormat.md
// CHECK-NEXT: target v100 vendor=nvidia memory_bytes=32000000000 bandwidth_gbs=900 peak_fp32_gflops=15700 peak_fp16_gflops=125000 nominal=false
// CHECK-NEXT: profile memory
// CHECK-NEXT: function main
// CHECK-NEXT: summary arena_bytes=8192 dynamic=0 est_time_overlapped_us=0.0412444 est_time_us=0.0412444 groups=2 memory_limit=32000000000 nominal=0 peak_bytes_after=8192 peak_bytes_before=8192 profile=memory target=v100 weight_bytes=20736

// The matmul and its GELU are one group: 2*16*64*64 + 8*16*64 FLOPs; the
// bytes are what enters (x, w1) and leaves (the GELU's result) it. At 900
// GB/s and 15.7 TFLOP/s that is memory-bound: 24576 B / 900 GB/s = 27.3 ns.
// The unpacked i4 weight takes a byte per element.
// CHECK-NEXT: group 0 name="fc1 (quoted)" after="" anchor=sits.matmul bound=memory bytes=24576 est_time_us=0.0273067 flops=139264 id=0 ops="fc1 (quoted),gelu1"
// CHECK-NEXT: group 1 name=fc2 after=0 anchor=sits.qmatmul bound=memory bytes=12544 est_time_us=0.0139378 flops=139264 id=1 ops=fc2
// CHECK-NEXT: op 0 op="fc1 (quoted)" bound=memory bytes=24576 est_time_us=0.0273067 flops=131072 group=0 index=0 name=sits.matmul
// CHECK-NEXT: op 1 op=gelu1 bound=memory bytes=8192 est_time_us=0.00910222 flops=8192 group=0 index=1 name=sits.activation
// CHECK-NEXT: op 2 op=fc2 bound=memory bytes=12544 est_time_us=0.0139378 flops=139264 group=1 index=2 name=sits.qmatmul
// CHECK-NEXT: tensor 0 name=gelu1 result=0 group=0 dtype=f32 shape=16x64 bytes=4096 offset=0 start=0 end=1 returned=false
// CHECK-NEXT: tensor 1 name=fc2 result=0 group=1 dtype=f32 shape=16x64 bytes=4096 offset=4096 start=1 end=1 returned=true
// CHECK-NEXT: weight name=w1 dtype=f32 shape=64x64 bytes=16384 packed=false
// CHECK-NEXT: weight name=w2 dtype=i4 shape=64x64 bytes=4096 packed=false
// CHECK-NEXT: weight name=s2 dtype=f32 shape=64 bytes=256 packed=false
// CHECK-NEXT: precision op=fc2 kind=weight block_shape=64x64 bytes=2048 est_error=0.0125 format=int4 fp32_bytes=16384
// CHECK-NEXT: memory peak_before=8192 peak_after=8192 arena=8192 limit=32000000000 weights=20736
// CHECK-NEXT: end

// STDOUT: sits-schedule 1
// STDOUT: profile latency
module attributes {sits.report.precision = [{op = "fc2", kind = "weight", format = ["int4"], block_shape = "64x64", est_error = 0.0125 : f64, bytes = 2048 : i64, fp32_bytes = 16384 : i64}]} {
  func.func @main(%x: tensor<16x64xf32>) -> tensor<16x64xf32> {
    %w1 = arith.constant dense<0.5> : tensor<64x64xf32> loc("w1")
    %w2 = arith.constant dense<3> : tensor<64x64xi4> loc("w2")
    %s2 = arith.constant dense<0.1> : tensor<64xf32> loc("s2")
    %h = sits.matmul %x, %w1 : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32> loc("fc1 (quoted)")
    %g = sits.activation <gelu> %h : tensor<16x64xf32> loc("gelu1")
    %y = sits.qmatmul %g, %w2, %s2 {axis = 1 : i64} : (tensor<16x64xf32>, tensor<64x64xi4>, tensor<64xf32>) -> tensor<16x64xf32> loc("fc2")
    return %y : tensor<16x64xf32>
  }
}
