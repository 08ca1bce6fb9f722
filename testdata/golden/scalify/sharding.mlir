// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 strict=true}' \
// RUN:   | filecheck %s

// Sharded programs: sharding annotations, shard_map's sdy.manual_computation and the
// collectives inside it. A scale is one scalar for the whole global tensor, so every
// device must use the same one where values of several devices meet and where a value
// leaves the manual region.

// Every op here has a rule: strict mode (which refuses an op without one) passes.

// A sharding constraint annotates the data; the scale (a replicated scalar) passes by.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8xf32> {{.*}}, [[XS:%.*]]: tensor<f32> {sdy.sharding = #sdy.sharding<@mesh, []>})
// CHECK-NEXT:    [[C:%.*]] = sdy.sharding_constraint [[X]] <@mesh, [{"data"}]> : tensor<8xf32>
// CHECK-NEXT:    return [[C]], [[XS]] : tensor<8xf32>, tensor<f32>
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=4]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) -> tensor<8xf32> {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"data"}]> : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// sdy.reshard (what Shardy's propagation writes for jax.sharding.reshard) moves the data to
// another sharding; the scale, a replicated scalar, passes by as for a constraint.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf32> {{.*}}, [[XS:%.*]]: tensor<f32> {sdy.sharding = #sdy.sharding<@mesh, []>})
// CHECK-NEXT:    [[R:%.*]] = sdy.reshard [[X]] <@mesh, [{}, {"data"}]> : tensor<8x16xf32>
// CHECK-NEXT:    return [[R]], [[XS]] : tensor<8x16xf32>, tensor<f32>
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=4]>
  func.func public @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) -> tensor<8x16xf32> {
    %0 = sdy.reshard %arg0 <@mesh, [{}, {"data"}]> : tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
}

// -----

// A runtime scale enters the manual region as a replicated i32 exponent operand beside
// its data. It is the same on every device, so the all_gather runs on the data as it is
// and the exponent leaves the region unchanged: no collective is added.

// CHECK-LABEL: func.func public @main
// CHECK:         [[E:%.*]] = stablehlo.subtract
// CHECK-NEXT:    [[M:%.*]]:2 = sdy.manual_computation(%arg0, [[E]]) in_shardings=[<@mesh, [{"data"}]>, <@mesh, []>] out_shardings=[<@mesh, [{}]>, <@mesh, []>] manual_axes={"data"} ([[D:%.*]]: tensor<2xf32>, [[DE:%.*]]: tensor<i32>) {
// CHECK-NEXT:      [[G:%.*]] = "stablehlo.all_gather"([[D]])
// CHECK-NEXT:      sdy.return [[G]], [[DE]] : tensor<8xf32>, tensor<i32>
// CHECK-NEXT:    } : (tensor<8xf32>, tensor<i32>) -> (tensor<8xf32>, tensor<i32>)
// CHECK-NOT:     all_reduce
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=4]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}]>}) -> tensor<8xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"data"}]>] out_shardings=[<@mesh, [{}]>] manual_axes={"data"} (%arg1: tensor<2xf32>) {
      %1 = "stablehlo.all_gather"(%arg1) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> : (tensor<2xf32>) -> tensor<8xf32>
      sdy.return %1 : tensor<8xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// A scale the body measures from its local data (a rescale point: a gradient before
// its psum) differs per device; a sum of data at different scales would be wrong. The
// devices agree first: a max all-reduce of the exponent over the collective's groups,
// each device's data shifted by its distance to the maximum. The agreed exponent is
// the same on every device of the region and leaves it as it is.

// CHECK-LABEL: func.func public @main
// CHECK:         sdy.manual_computation
// CHECK:           [[V:%.*]] = stablehlo.reshape [[LOCAL:%.*]] : (tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT:      [[MAX:%.*]] = "stablehlo.all_reduce"([[V]]) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
// CHECK:             stablehlo.maximum
// CHECK:           }) : (tensor<1xi32>) -> tensor<1xi32>
// CHECK-NEXT:      [[AGREED:%.*]] = stablehlo.reshape [[MAX]] : (tensor<1xi32>) -> tensor<i32>
// CHECK-NEXT:      [[SHIFT:%.*]] = stablehlo.subtract [[LOCAL]], [[AGREED]] : tensor<i32>
// CHECK:           [[SHIFTED:%.*]] = stablehlo.multiply
// CHECK-NEXT:      [[SUM:%.*]] = "stablehlo.all_reduce"([[SHIFTED]])
// CHECK:           sdy.return [[SUM]], [[AGREED]] : tensor<2xf32>, tensor<i32>
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=4]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}]>}) -> tensor<2xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"data"}]>] out_shardings=[<@mesh, [{}]>] manual_axes={"data"} (%arg1: tensor<2xf32>) {
      %1 = stablehlo.multiply %arg1, %arg1 {scalify.rescale = "amax:nearest"} : tensor<2xf32>
      %2 = "stablehlo.all_reduce"(%1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }) : (tensor<2xf32>) -> tensor<2xf32>
      sdy.return %2 : tensor<2xf32>
    } : (tensor<8xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

// Results whose scales the body measured per device leave the region at one scale per
// global tensor: all of them are agreed by one max all-reduce of a vector of exponents,
// not one collective per scale.

// CHECK-LABEL: func.func public @main
// CHECK:           [[PACKED:%.*]] = stablehlo.concatenate {{.*}} : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
// CHECK-NEXT:      [[MAX:%.*]] = "stablehlo.all_reduce"([[PACKED]])
// CHECK:           }) : (tensor<2xi32>) -> tensor<2xi32>
// CHECK-NOT:       all_reduce
// CHECK:           sdy.return
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=4]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}]>}) -> (tensor<8xf32>, tensor<8xf32>) {
    %0:2 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"data"}]>] out_shardings=[<@mesh, [{"data"}]>, <@mesh, [{"data"}]>] manual_axes={"data"} (%arg1: tensor<2xf32>) {
      %1 = stablehlo.multiply %arg1, %arg1 {scalify.rescale = "amax:nearest"} : tensor<2xf32>
      %2 = stablehlo.add %arg1, %arg1 {scalify.rescale = "amax:nearest"} : tensor<2xf32>
      sdy.return %1, %2 : tensor<2xf32>, tensor<2xf32>
    } : (tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    return %0#0, %0#1 : tensor<8xf32>, tensor<8xf32>
  }
}

// -----

// Scales the body measures from values every device holds in full (an argument replicated
// over the manual axes, a psum's result) are equal everywhere: they leave the region as
// they are, with no all-reduce to agree them.

// CHECK-LABEL: func.func public @main
// CHECK:         sdy.manual_computation
// CHECK-NOT:       all_reduce
// CHECK:           sdy.return
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=4]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) -> tensor<8xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{}]>] out_shardings=[<@mesh, [{}]>] manual_axes={"data"} (%arg1: tensor<8xf32>) {
      %1 = stablehlo.multiply %arg1, %arg1 {scalify.rescale = "amax:nearest"} : tensor<8xf32>
      sdy.return %1 : tensor<8xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// CHECK-LABEL: func.func public @main
// CHECK:         sdy.manual_computation
// CHECK-COUNT-2:   "stablehlo.all_reduce"
// CHECK-NOT:       all_reduce
// CHECK:           sdy.return
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=4]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}]>}) -> tensor<2xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"data"}]>] out_shardings=[<@mesh, [{}]>] manual_axes={"data"} (%arg1: tensor<2xf32>) {
      %1 = stablehlo.multiply %arg1, %arg1 {scalify.rescale = "amax:nearest"} : tensor<2xf32>
      %2 = "stablehlo.all_reduce"(%1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }) : (tensor<2xf32>) -> tensor<2xf32>
      %3 = stablehlo.multiply %2, %2 {scalify.rescale = "amax:nearest"} : tensor<2xf32>
      sdy.return %3 : tensor<2xf32>
    } : (tensor<8xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

// A partition's id makes what it touches differ per device: that scale is agreed.

// CHECK-LABEL: func.func public @main
// CHECK:         sdy.manual_computation
// CHECK:           stablehlo.partition_id
// CHECK:           "stablehlo.all_reduce"
// CHECK:           sdy.return
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=4]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) -> tensor<8xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{}]>] out_shardings=[<@mesh, [{}]>] manual_axes={"data"} (%arg1: tensor<8xf32>) {
      %p = stablehlo.partition_id : tensor<ui32>
      %f = stablehlo.convert %p : (tensor<ui32>) -> tensor<f32>
      %b = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<8xf32>
      %1 = stablehlo.multiply %arg1, %b {scalify.rescale = "amax:nearest"} : tensor<8xf32>
      sdy.return %1 : tensor<8xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// ppermute moves data between devices: a per-device scale moves beside it (the same
// collective_permute on the exponent), then is agreed where the result leaves the region.

// CHECK-LABEL: func.func public @main
// CHECK:           [[P:%.*]] = "stablehlo.collective_permute"({{.*}}) {{.*}} : (tensor<2xf32>) -> tensor<2xf32>
// CHECK:           [[PE:%.*]] = "stablehlo.collective_permute"({{.*}}) {{.*}} : (tensor<i32>) -> tensor<i32>
// CHECK-NEXT:      stablehlo.reshape [[PE]] : (tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT:      "stablehlo.all_reduce"
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=4]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}]>}) -> tensor<8xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"data"}]>] out_shardings=[<@mesh, [{"data"}]>] manual_axes={"data"} (%arg1: tensor<2xf32>) {
      %1 = stablehlo.multiply %arg1, %arg1 {scalify.rescale = "amax:nearest"} : tensor<2xf32>
      %2 = "stablehlo.collective_permute"(%1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>}> : (tensor<2xf32>) -> tensor<2xf32>
      sdy.return %2 : tensor<2xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// A static scale (a constant's) is the same on every device: it stays static inside the
// region, with no exponent operand.

// CHECK-LABEL: func.func public @main
// CHECK:         sdy.manual_computation(%arg0, {{%[^,]*}}, [[C:%cst[_0-9]*]]) in_shardings=[<@mesh, [{"data"}]>, <@mesh, []>, <@mesh, [{"data"}]>]
// CHECK-SAME:      ([[X:%.*]]: tensor<2xf32>, [[XE:%.*]]: tensor<i32>, [[K:%.*]]: tensor<2xf32>)
// CHECK-NEXT:      stablehlo.multiply [[X]], [[K]] : tensor<2xf32>
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["data"=4]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}]>}) -> tensor<8xf32> {
    %c = stablehlo.constant dense<3.0> : tensor<8xf32>
    %0 = sdy.manual_computation(%arg0, %c) in_shardings=[<@mesh, [{"data"}]>, <@mesh, [{"data"}]>] out_shardings=[<@mesh, [{"data"}]>] manual_axes={"data"} (%arg1: tensor<2xf32>, %arg2: tensor<2xf32>) {
      %1 = stablehlo.multiply %arg1, %arg2 : tensor<2xf32>
      sdy.return %1 : tensor<2xf32>
    } : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
