// RUN: scalify-hlo rewrite %s --pipeline "combine-all-reduces{threshold-bytes=20}" | filecheck %s

// Three independent sums of 8 bytes each under a 20-byte threshold: the first two become
// one (16 bytes), the third would make it 24 and stays on its own.

// CHECK-LABEL: func.func @threshold
// CHECK:         stablehlo.concatenate %arg0, %arg1, dim = 0
// CHECK:         "stablehlo.all_reduce"
// CHECK:         (tensor<4xf32>) -> tensor<4xf32>
// CHECK:         "stablehlo.all_reduce"(%arg2)
// CHECK:         (tensor<2xf32>) -> tensor<2xf32>
// CHECK-NOT:     "stablehlo.all_reduce"
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @threshold(%a: tensor<2xf32>, %b: tensor<2xf32>, %c: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
    %x = "stablehlo.all_reduce"(%a) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2xf32>) -> tensor<2xf32>
    %y = "stablehlo.all_reduce"(%b) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2xf32>) -> tensor<2xf32>
    %z = "stablehlo.all_reduce"(%c) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2xf32>) -> tensor<2xf32>
    return %x, %y, %z : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
  }
}
