// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{delayed-statistics=auto},fp8-dots{delayed-statistics=auto}' | filecheck %s

// delayed-statistics=auto (the default policy's): a module that JAX's SPMD partitioner
// splits over several devices (mhlo.num_partitions > 1) is rewritten as with measure, its
// statistics' exponents returned for the next call (there each statistic of a sharded
// tensor is an all-reduce, and current statistics chain them); a module for one device as
// with none. scalify and fp8-dots decide alike: one point, then the dot's two amaxes.

// CHECK-LABEL: func.func @partitioned
// CHECK-SAME:    -> ({{.*}}, tensor<3xi32> {jax.result_info = "delayed_exponents"})
// CHECK-SAME:    scalify.delayed_exponents = 3
// CHECK:         return {{.*}} : tensor<4x8xf16>, tensor<f32>, tensor<3xi32>
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @partitioned(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] {scalify.rescale = "amax:nearest"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}

// -----

// CHECK-LABEL: func.func @one_device
// CHECK-NOT:     delayed_exponents
// CHECK:         return {{.*}} : tensor<4x8xf16>, tensor<f32>
module attributes {mhlo.num_partitions = 1 : i32} {
  func.func @one_device(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] {scalify.rescale = "amax:nearest"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}
