// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16 square-encoding=none},simplify{pack-scales=none}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f16 square-dtype=f16},simplify{pack-scales=none}' | filecheck %s --check-prefix F16

// Squares keep f32 data when the data dtype is f16 (square-dtype=auto): f16 cannot hold the
// square of a tensor whose entries span more than 12 binades. (square-encoding=none: squares
// cross the boundary as computed; the default stores them as square roots, see
// square-encoding.mlir.) What the square is added to
// (Adam's second moment, an argument and a result here) is f32 too, and constants that meet
// it are made in f32 (0.999, not f16's 0.99902). The two terms meet at the max of their i32
// exponents, and the f32 sum is returned with the excess over the f32 scale in its data.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<4xf16>, %arg1: tensor<f32>, %arg2: tensor<4xf32>, %arg3: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-DAG:     stablehlo.constant dense<1.998000e+00> : tensor<4xf32>
// CHECK-DAG:     [[G:%.*]] = stablehlo.convert %arg0 : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         stablehlo.multiply [[G]], [[G]] : tensor<4xf32>
// CHECK:         stablehlo.maximum {{.*}} : tensor<i32>
// CHECK:         [[SUM:%.*]] = stablehlo.add {{.*}} : tensor<4xf32>
// CHECK:         [[OUT:%.*]] = stablehlo.multiply [[SUM]], {{.*}} : tensor<4xf32>
// CHECK:         return [[OUT]], {{.*}} : tensor<4xf32>, tensor<f32>

// F16-LABEL: func.func public @main
// F16-SAME:    (%arg0: tensor<4xf16>, %arg1: tensor<f32>, %arg2: tensor<4xf16>, %arg3: tensor<f32>)
// F16-SAME:    -> (tensor<4xf16>, tensor<f32>)
// F16:         stablehlo.multiply %arg0, %arg0 : tensor<4xf16>
func.func public @main(%g: tensor<4xf32>, %nu: tensor<4xf32>) -> tensor<4xf32> {
  %b = stablehlo.constant dense<0.999> : tensor<4xf32>
  %c = stablehlo.constant dense<1.000000e-03> : tensor<4xf32>
  %0 = stablehlo.multiply %g, %g : tensor<4xf32>
  %1 = stablehlo.multiply %c, %0 : tensor<4xf32>
  %2 = stablehlo.multiply %b, %nu : tensor<4xf32>
  %3 = stablehlo.add %2, %1 : tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// The Adam update: sqrt(nu) + eps stays f32 (in f16, eps = 1e-8 flushes next to the largest
// |g| and 0 / (0 + eps) is NaN); the division runs in f32 and its result, which is not a
// square, goes on in f16 after an amax rescale: the data is multiplied by 2^-r (r the i32
// exponent of the rounded amax; the factor's bits are 254<<23 minus the amax's) and r is
// added to its exponent (for all-zero data, what
// moves it to 2^-126 instead: a second select). At the result the f16 data
// passes through f32 once more to take the excess over the f32 scale.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    -> (tensor<4xf16>, tensor<f32>, tensor<4xf32>, tensor<f32>)
// CHECK:         [[ROOT:%.*]] = stablehlo.sqrt {{.*}} : tensor<4xf32>
// CHECK:         [[DEN:%.*]] = stablehlo.add {{.*}} : tensor<4xf32>
// CHECK:         [[U:%.*]] = stablehlo.divide {{.*}}, [[DEN]] : tensor<4xf32>
// CHECK:         stablehlo.reduce({{.*}}) applies stablehlo.maximum
// CHECK:         [[R:%.*]] = stablehlo.select {{.*}} : tensor<i1>, tensor<i32>
// CHECK-NEXT:    stablehlo.bitcast_convert [[R]] : (tensor<i32>) -> tensor<f32>
// CHECK:         [[US:%.*]] = stablehlo.multiply [[U]], {{.*}} : tensor<4xf32>
// CHECK:         stablehlo.compare EQ, {{.*}} : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:    stablehlo.select {{.*}} : tensor<i1>, tensor<i32>
// CHECK-NEXT:    [[MOVED:%.*]] = stablehlo.select {{.*}} : tensor<i1>, tensor<i32>
// CHECK-NEXT:    [[U16:%.*]] = stablehlo.convert [[US]] : (tensor<4xf32>) -> tensor<4xf16>
// CHECK:         stablehlo.add {{.*}}, [[MOVED]] : tensor<i32>
// CHECK:         stablehlo.convert [[U16]] : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         [[OUT:%.*]] = stablehlo.convert {{.*}} : (tensor<4xf32>) -> tensor<4xf16>
// CHECK:         return [[OUT]], {{.*}} : tensor<4xf16>, tensor<f32>, tensor<4xf32>, tensor<f32>
func.func public @main(%g: tensor<4xf32>, %mu: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %eps = stablehlo.constant dense<1.000000e-08> : tensor<4xf32>
  %0 = stablehlo.multiply %g, %g : tensor<4xf32>
  %1 = stablehlo.sqrt %0 : tensor<4xf32>
  %2 = stablehlo.add %1, %eps : tensor<4xf32>
  %3 = stablehlo.divide %mu, %2 : tensor<4xf32>
  return %3, %0 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A square times another tensor is no longer a square: computed in f32, handed on in f16.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    -> (tensor<4xf16>, tensor<f32>)
// CHECK:         [[P:%.*]] = stablehlo.multiply {{.*}} : tensor<4xf32>
// CHECK:         stablehlo.convert {{.*}} : (tensor<4xf32>) -> tensor<4xf16>
func.func public @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %x, %x : tensor<4xf32>
  %1 = stablehlo.multiply %0, %y : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A square up to scalar factors (Prodigy's (1 - b2) * d * d with d = lr * g: a product of
// (1 - b2) * d and d) is a square too: it and what it is added to keep f32 data.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<4xf16>, %arg1: tensor<f32>, %arg2: tensor<f32>, %arg3: tensor<f32>, %arg4: tensor<4xf32>, %arg5: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK:         [[D:%.*]] = stablehlo.multiply {{.*}} : tensor<4xf16>
// CHECK:         [[D32:%.*]] = stablehlo.convert [[D]] : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         stablehlo.multiply {{.*}}, [[D32]] : tensor<4xf32>
// CHECK:         [[CD:%.*]] = stablehlo.convert {{.*}} : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         stablehlo.multiply [[CD]], {{.*}} : tensor<4xf32>
// CHECK-NEXT:    stablehlo.add {{.*}} : tensor<4xf32>
// CHECK:         return {{.*}} : tensor<4xf32>, tensor<f32>

func.func public @main(%g: tensor<4xf32>, %lr: tensor<f32>, %nu: tensor<4xf32>) -> tensor<4xf32> {
  %b = stablehlo.constant dense<0.999> : tensor<4xf32>
  %c = stablehlo.constant dense<1.000000e-03> : tensor<4xf32>
  %s = stablehlo.broadcast_in_dim %lr, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %d = stablehlo.multiply %s, %g : tensor<4xf32>
  %0 = stablehlo.multiply %c, %d : tensor<4xf32>
  %1 = stablehlo.multiply %0, %d : tensor<4xf32>
  %2 = stablehlo.multiply %b, %nu : tensor<4xf32>
  %3 = stablehlo.add %2, %1 : tensor<4xf32>
  return %3 : tensor<4xf32>
}
