// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=bf16}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' | filecheck %s --check-prefix F16

// Adam's second-moment correction 1 - 0.999^t: bf16 rounds 0.999 to 1.0, so in bf16 data
// the correction was 0 and the corrected moment inf. Rank-0 values hold f32 data: the
// constant, the power and the difference are f32, rescaled by the difference's amax (a
// difference of a power can be 1e-6, past f16's normal range) and rounded once where the
// broadcast makes a tensor of it.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<i32>, %arg1: tensor<4xbf16>, %arg2: tensor<f32>)
// CHECK-DAG:     [[B:%.*]] = stablehlo.constant dense<1.998000e+00> : tensor<f32>
// CHECK-DAG:     [[T:%.*]] = stablehlo.convert %arg0 : (tensor<i32>) -> tensor<f32>
// CHECK:         [[P:%.*]] = stablehlo.power {{%.*}}, [[T]] : tensor<f32>
// CHECK:         [[D:%.*]] = stablehlo.subtract {{%.*}}, [[P]] : tensor<f32>
// CHECK:         [[R:%.*]] = stablehlo.multiply [[D]], {{%.*}} : tensor<f32>
// CHECK:         [[N:%.*]] = stablehlo.convert [[R]] : (tensor<f32>) -> tensor<bf16>
// CHECK-NEXT:    stablehlo.broadcast_in_dim [[N]], dims = [] : (tensor<bf16>) -> tensor<4xbf16>

// F16-LABEL: func.func public @main
// F16:         [[P:%.*]] = stablehlo.power {{%.*}}, {{%.*}} : tensor<f32>
// F16:         stablehlo.subtract {{%.*}}, [[P]] : tensor<f32>
func.func public @main(%t: tensor<i32>, %nu: tensor<4xf32>) -> tensor<4xf32> {
  %b = stablehlo.constant dense<0.999> : tensor<f32>
  %0 = stablehlo.convert %t : (tensor<i32>) -> tensor<f32>
  %1 = stablehlo.power %b, %0 : tensor<f32>
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %2 = stablehlo.subtract %one, %1 : tensor<f32>
  %3 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %4 = stablehlo.divide %nu, %3 : tensor<4xf32>
  return %4 : tensor<4xf32>
}

// -----

// A rank-0 argument (a learning rate) and result (a sum, a loss) hold f32 data beside their
// scales, and a full reduction to a rank-0 value sums in f32; the tensor update stays bf16.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<f32>, %arg1: tensor<f32>, %arg2: tensor<4xbf16>, %arg3: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xbf16>, tensor<f32>, tensor<f32>, tensor<f32>)
// CHECK:         [[W:%.*]] = stablehlo.convert %arg2 : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK-NEXT:    stablehlo.reduce([[W]] init: {{%.*}}) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
// CHECK:         stablehlo.subtract %arg2, {{%.*}} : tensor<4xbf16>

// F16-LABEL: func.func public @main
// F16-SAME:    (%arg0: tensor<f32>, %arg1: tensor<f32>, %arg2: tensor<4xf16>, %arg3: tensor<f32>)
func.func public @main(%lr: tensor<f32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%w init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %0 = stablehlo.multiply %lr, %s : tensor<f32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %2 = stablehlo.subtract %w, %1 : tensor<4xf32>
  return %2, %s : tensor<4xf32>, tensor<f32>
}

// -----

// A loop carries a rank-0 value in f32 data and a tensor in bf16: block arguments, body and
// results agree.

// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.while({{.*}}) : tensor<i32>, tensor<4xbf16>, tensor<i32>, tensor<f32>, tensor<i32>
// CHECK:           stablehlo.multiply %iterArg_{{[0-9]+}}, {{%.*}} : tensor<f32>
func.func public @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %i0, %v = %x, %acc = %zero) : tensor<i32>, tensor<4xf32>, tensor<f32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      %k = stablehlo.constant dense<0.9> : tensor<f32>
      %a = stablehlo.multiply %acc, %k : tensor<f32>
      %kk = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<f32>) -> tensor<4xf32>
      %w = stablehlo.multiply %v, %kk : tensor<4xf32>
      stablehlo.return %j, %w, %a : tensor<i32>, tensor<4xf32>, tensor<f32>
    }
  return %r#1, %r#2 : tensor<4xf32>, tensor<f32>
}
