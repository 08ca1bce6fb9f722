// RUN: scalify-hlo rewrite %s --split-input-file --pipeline combine-all-reduces | filecheck %s

// Two independent sums over the devices, of different shapes, with an op between that reads
// the first: one all-reduce of both operands flattened and concatenated, where the second
// was; each result a slice of it, reshaped back; the op that read the first moves after it.

// CHECK-LABEL: func.func @independent
// CHECK:         [[A:%.*]] = stablehlo.reshape %arg0 : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK:         [[J:%.*]] = stablehlo.concatenate [[A]], %arg1, dim = 0
// CHECK:         [[R:%.*]] = "stablehlo.all_reduce"([[J]])
// CHECK:         stablehlo.add
// CHECK:         (tensor<10xf32>) -> tensor<10xf32>
// CHECK:         [[S0:%.*]] = stablehlo.slice [[R]] [0:6]
// CHECK:         [[X:%.*]] = stablehlo.reshape [[S0]] : (tensor<6xf32>) -> tensor<2x3xf32>
// CHECK:         [[Y:%.*]] = stablehlo.slice [[R]] [6:10]
// CHECK:         [[N:%.*]] = stablehlo.negate [[X]]
// CHECK-NOT:     stablehlo.all_reduce
// CHECK:         return [[N]], [[Y]]
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @independent(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> (tensor<2x3xf32>, tensor<4xf32>) {
    %x = "stablehlo.all_reduce"(%a) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %n = stablehlo.negate %x : tensor<2x3xf32>
    %y = "stablehlo.all_reduce"(%b) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %n, %y : tensor<2x3xf32>, tensor<4xf32>
  }
}

// -----

// The second sum reads the first's result: they stay two.

// CHECK-LABEL: func.func @dependent
// CHECK:         "stablehlo.all_reduce"(%arg0)
// CHECK:         "stablehlo.all_reduce"(%{{.*}})
// CHECK-NOT:     stablehlo.concatenate
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @dependent(%a: tensor<4xf32>) -> tensor<4xf32> {
    %x = "stablehlo.all_reduce"(%a) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %n = stablehlo.negate %x : tensor<4xf32>
    %y = "stablehlo.all_reduce"(%n) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// A sum and a max, a sum of f32 and one of f16, and sums over other device groups: each
// pair has nothing to share, and nothing changes.

// CHECK-LABEL: func.func @different
// CHECK-COUNT-6: "stablehlo.all_reduce"
// CHECK-NOT:     stablehlo.concatenate
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @different(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf16>, %d: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    %x = "stablehlo.all_reduce"(%a) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %y = "stablehlo.all_reduce"(%b) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.maximum %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %z = "stablehlo.all_reduce"(%c) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f16>, %r: tensor<f16>):
      %s = stablehlo.add %l, %r : tensor<f16>
      stablehlo.return %s : tensor<f16>
    }) : (tensor<4xf16>) -> tensor<4xf16>
    %w = "stablehlo.all_reduce"(%d) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %v = "stablehlo.all_reduce"(%d) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %u = "stablehlo.all_reduce"(%d) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.maximum %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %x, %y, %z, %w, %v, %u : tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// Inside a shard_map body (sdy.manual_computation), where the rewrite's psums are: the
// block's two sums become one (XLA rejects a variadic all-reduce there, so it is one vector).

// CHECK-LABEL: func.func @manual
// CHECK:         sdy.manual_computation
// CHECK:         stablehlo.concatenate
// CHECK-COUNT-1: "stablehlo.all_reduce"
// CHECK-NOT:     "stablehlo.all_reduce"
// CHECK:         sdy.return
module @shard attributes {mhlo.num_partitions = 8 : i32} {
  sdy.mesh @mesh = <["d"=8]>
  func.func @manual(%a: tensor<16xf32>, %b: tensor<8xf32>) -> (tensor<2xf32>, tensor<1xf32>) {
    %0:2 = sdy.manual_computation(%a, %b) in_shardings=[<@mesh, [{"d"}]>, <@mesh, [{"d"}]>] out_shardings=[<@mesh, [{}]>, <@mesh, [{}]>] manual_axes={"d"} (%la: tensor<2xf32>, %lb: tensor<1xf32>) {
      %x = "stablehlo.all_reduce"(%la) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
      ^bb0(%l: tensor<f32>, %r: tensor<f32>):
        %s = stablehlo.add %l, %r : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }) : (tensor<2xf32>) -> tensor<2xf32>
      %y = "stablehlo.all_reduce"(%lb) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
      ^bb0(%l: tensor<f32>, %r: tensor<f32>):
        %s = stablehlo.add %l, %r : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }) : (tensor<1xf32>) -> tensor<1xf32>
      sdy.return %x, %y : tensor<2xf32>, tensor<1xf32>
    } : (tensor<16xf32>, tensor<8xf32>) -> (tensor<2xf32>, tensor<1xf32>)
    return %0#0, %0#1 : tensor<2xf32>, tensor<1xf32>
  }
}

// -----

// One device: left as it is (nothing for XLA's fusion to chain).

// CHECK-LABEL: func.func @one_device
// CHECK-COUNT-2: "stablehlo.all_reduce"
// CHECK-NOT:     stablehlo.concatenate
func.func @one_device(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %x = "stablehlo.all_reduce"(%a) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0]]> : tensor<1x1xi64>, use_global_device_ids}> ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4xf32>) -> tensor<4xf32>
  %y = "stablehlo.all_reduce"(%b) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0]]> : tensor<1x1xi64>, use_global_device_ids}> ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return %x, %y : tensor<4xf32>, tensor<4xf32>
}

// -----

// A loop between the sums reads the first one's result: it moves below the combined sum,
// body and all; the second sum reads nothing of the first and joins it.

// CHECK-LABEL: func.func @loop_between
// CHECK:         [[R:%.*]] = "stablehlo.all_reduce"
// CHECK:         (tensor<8xf32>) -> tensor<8xf32>
// CHECK:         [[X:%.*]] = stablehlo.slice [[R]] [0:4]
// CHECK:         stablehlo.while
// CHECK-SAME:    [[X]]
// CHECK-NOT:     "stablehlo.all_reduce"
// CHECK:         return
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @loop_between(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %x = "stablehlo.all_reduce"(%a) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %w:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<4xf32>
     cond {
      %c3 = stablehlo.constant dense<3> : tensor<i32>
      %lt = stablehlo.compare LT, %i, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %c1 = stablehlo.constant dense<1> : tensor<i32>
      %n = stablehlo.add %i, %c1 : tensor<i32>
      %d = stablehlo.add %v, %x : tensor<4xf32>
      stablehlo.return %n, %d : tensor<i32>, tensor<4xf32>
    }
    %y = "stablehlo.all_reduce"(%b) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %w#1, %y : tensor<4xf32>, tensor<4xf32>
  }
}
