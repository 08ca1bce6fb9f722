// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// The scaled signature: every f16/bf16/f32 argument and result of the entry
// function becomes two consecutive values, data then a tensor<f32> scale (a power
// of two; inside the program it is carried as an i32 exponent).
// Other values (integers, f64) stay as they are. Argument and result
// attributes follow their value: the data keeps them, the scale gets what
// makes sense for it.

// Integer and f64 arguments and results are untouched, and so are the ops on
// them; only the f32 one is split.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[I:%.*]]: tensor<4xi32>, [[F:%.*]]: tensor<4xf64>, [[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xi32>, tensor<4xf64>, tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[I2:%.*]] = stablehlo.add [[I]], [[I]] : tensor<4xi32>
// CHECK-NEXT:    [[F2:%.*]] = stablehlo.add [[F]], [[F]] : tensor<4xf64>
// CHECK-NEXT:    return [[I2]], [[F2]], [[X]], [[XS]] : tensor<4xi32>, tensor<4xf64>, tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xi32>, %arg1: tensor<4xf64>, %arg2: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xf64>, tensor<4xf32>) {
  %0 = stablehlo.add %arg0, %arg0 : tensor<4xi32>
  %1 = stablehlo.add %arg1, %arg1 : tensor<4xf64>
  return %0, %1, %arg2 : tensor<4xi32>, tensor<4xf64>, tensor<4xf32>
}

// -----

// jax.result_info: a split result gets the suffixes .data and .scale; an
// integer result keeps its name.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<4xi32>)
// CHECK-SAME:    -> (tensor<4xf32> {jax.result_info = "[0].data"}, tensor<f32> {jax.result_info = "[0].scale"}, tensor<4xi32> {jax.result_info = "[1]"})
// CHECK-NEXT:    return [[X]], [[XS]], [[I]] : tensor<4xf32>, tensor<f32>, tensor<4xi32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xf32> {jax.result_info = "[0]"}, tensor<4xi32> {jax.result_info = "[1]"}) {
  return %arg0, %arg1 : tensor<4xf32>, tensor<4xi32>
}

// -----

// mhlo.sharding: the data keeps the sharding, its scale is replicated, on
// arguments and results alike.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8xf32> {mhlo.sharding = "{devices=[2]<=[2]}"}, [[XS:%.*]]: tensor<f32> {mhlo.sharding = "{replicated}"})
// CHECK-SAME:    -> (tensor<8xf32> {mhlo.sharding = "{devices=[2]<=[2]}"}, tensor<f32> {mhlo.sharding = "{replicated}"})
// CHECK-NEXT:    return [[X]], [[XS]] : tensor<8xf32>, tensor<f32>
func.func public @main(%arg0: tensor<8xf32> {mhlo.sharding = "{devices=[2]<=[2]}"}) -> (tensor<8xf32> {mhlo.sharding = "{devices=[2]<=[2]}"}) {
  return %arg0 : tensor<8xf32>
}

// -----

// sdy.sharding: the scale is replicated over the same mesh.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}, [[XS:%.*]]: tensor<f32> {sdy.sharding = #sdy.sharding<@mesh, []>})
// CHECK-SAME:    -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}, tensor<f32> {sdy.sharding = #sdy.sharding<@mesh, []>})
// CHECK-NEXT:    return [[X]], [[XS]] : tensor<8xf32>, tensor<f32>
sdy.mesh @mesh = <["x"=2]>
func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
  return %arg0 : tensor<8xf32>
}

// -----

// tf.aliasing_output (buffer donation) is remapped to the new result index:
// result 2 of the original is result 3 once result 0 is split. The donated
// argument's data aliases the result's data.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<4xi32>, [[Y:%.*]]: tensor<4xf32> {tf.aliasing_output = 3 : i32}, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>, tensor<4xi32>, tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[N:%.*]] = stablehlo.negate [[Y]] : tensor<4xf32>
// CHECK-NEXT:    return [[X]], [[XS]], [[I]], [[N]], [[YS]] : tensor<4xf32>, tensor<f32>, tensor<4xi32>, tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>, %arg2: tensor<4xf32> {tf.aliasing_output = 2 : i32}) -> (tensor<4xf32>, tensor<4xi32>, tensor<4xf32>) {
  %0 = stablehlo.negate %arg2 : tensor<4xf32>
  return %arg0, %arg1, %0 : tensor<4xf32>, tensor<4xi32>, tensor<4xf32>
}

// -----

// func.call is inlined before scalify: the callee's body is rewritten in
// place (x * x: the i32 exponent of x_s is doubled, and the result scale is
// rebuilt as 2^clamp(2 e, -126, 127) with the excess in the data), and the
// private callee is gone.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[M:%.*]] = stablehlo.multiply [[X]], [[X]] : tensor<4xf32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[E:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:    [[E2:%.*]] = stablehlo.multiply [[E]], [[TWO]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.clamp {{%.*}}, [[E2]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EXCESS:%.*]] = stablehlo.subtract [[E2]], [[H]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.clamp {{%.*}}, [[EXCESS]], {{%.*}} : tensor<i32>
// CHECK:         [[M1:%.*]] = stablehlo.multiply [[M]], {{%.*}} : tensor<4xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[M1]], [[S]] : tensor<4xf32>, tensor<f32>
// CHECK-NEXT:  }
// CHECK-NEXT: }
// CHECK-NOT:   @helper
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @helper(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @helper(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %arg0, %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The entry function lists its scale arguments (scalify.scale_args), so that a
// host running the module alone (scalify-hlo run) can find, check and split the
// scales it is given: here the scales of %x and %y, arguments 1 and 4 of the new
// signature, between an integer and an f64 argument that stay single.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<i32>, [[Y:%.*]]: tensor<2xf32>, [[YS:%.*]]: tensor<f32>, [[F:%.*]]: tensor<f64>)
// CHECK-SAME:    attributes {scalify.original_type = {{.*}}, scalify.scale_args = array<i64: 1, 4>}
func.func public @main(%x: tensor<4xf32>, %i: tensor<i32>, %y: tensor<2xf32>, %f: tensor<f64>) -> (tensor<4xf32>, tensor<2xf32>) {
  return %x, %y : tensor<4xf32>, tensor<2xf32>
}

// -----

// A function without floating arguments has no scale arguments to list.

// CHECK-LABEL: func.func public @main
// CHECK-NOT:     scalify.scale_args
// CHECK:         return
func.func public @main(%i: tensor<i32>) -> tensor<f32> {
  %0 = stablehlo.convert %i : (tensor<i32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Names: JAX names each argument by its location. The rewrite writes the path
// into jax.arg_info, with .data and .scale on the two halves of a split
// argument, so that a module printed without locations (the default) still
// names its inputs; scalify-hlo run and compare print them. The function
// records its type before the split in scalify.original_type: scalify-hlo run
// takes inputs in that signature and joins the outputs back.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32> {jax.arg_info = "p['w'].data"}, [[XS:%.*]]: tensor<f32> {jax.arg_info = "p['w'].scale"}, [[N:%.*]]: tensor<i32> {jax.arg_info = "step"})
// CHECK-SAME:    -> (tensor<4xf32> {jax.result_info = "result.data"}, tensor<f32> {jax.result_info = "result.scale"})
// CHECK-SAME:    attributes {scalify.original_type = (tensor<4xf32>, tensor<i32>) -> tensor<4xf32>, scalify.scale_args = array<i64: 1>}
// CHECK-NEXT:    return [[X]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32> loc("p['w']"), %arg1: tensor<i32> loc("step")) -> (tensor<4xf32> {jax.result_info = "result"}) {
  return %arg0 : tensor<4xf32>
}
