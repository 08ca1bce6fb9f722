// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Control-flow family (while, case): (data, scale) pairs are carried through
// block arguments, yields and results. A loop-carried scale is a loop-carried
// value; a case result's scale is whatever the branch taken returns.

// while carrying a float and an i32 counter: the float becomes two carried
// values (data, scale) next to the counter; the body squares the data and the
// carried scale.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C0:%.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[C3:%.*]] = stablehlo.constant dense<3> : tensor<i32>
// CHECK-NEXT:    [[W:%.*]]:3 = stablehlo.while([[D:%.*]] = [[X]], [[S:%.*]] = [[XS]], [[N:%.*]] = [[C0]]) : tensor<4xf32>, tensor<f32>, tensor<i32>
// CHECK-NEXT:    cond {
// CHECK-NEXT:      [[LT:%.*]] = stablehlo.compare LT, [[N]], [[C3]], SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:      stablehlo.return [[LT]] : tensor<i1>
// CHECK-NEXT:    } do {
// CHECK-NEXT:      [[D2:%.*]] = stablehlo.multiply [[D]], [[D]] : tensor<4xf32>
// CHECK-NEXT:      [[N1:%.*]] = stablehlo.add [[N]], [[C1]] : tensor<i32>
// CHECK-NEXT:      [[S2:%.*]] = stablehlo.multiply [[S]], [[S]] : tensor<f32>
// CHECK-NEXT:      stablehlo.return [[D2]], [[S2]], [[N1]] : tensor<4xf32>, tensor<f32>, tensor<i32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return [[W]]#0, [[W]]#1 : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c0) : tensor<4xf32>, tensor<i32>
  cond {
    %1 = stablehlo.compare LT, %iterArg_0, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.multiply %iterArg, %iterArg : tensor<4xf32>
    %2 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
    stablehlo.return %1, %2 : tensor<4xf32>, tensor<i32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

// A float loop condition: x < 100 compares the carried data with the constant
// (1.5625 at the static scale 2^6) brought to the carried runtime scale, in the
// cond region itself. The body adds the same constant at that scale and
// yields the scale unchanged.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<f32>, [[XS:%.*]]: tensor<f32>) -> (tensor<f32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.562500e+00> : tensor<f32>
// CHECK-NEXT:    [[W:%.*]]:2 = stablehlo.while([[D:%.*]] = [[X]], [[S:%.*]] = [[XS]]) : tensor<f32>, tensor<f32>
// CHECK-NEXT:    cond {
// CHECK-NEXT:      [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:      [[INV:%.*]] = stablehlo.divide [[ONE]], [[S]] : tensor<f32>
// CHECK-NEXT:      [[E6:%.*]] = stablehlo.constant dense<6.400000e+01> : tensor<f32>
// CHECK-NEXT:      [[R:%.*]] = stablehlo.multiply [[INV]], [[E6]] : tensor<f32>
// CHECK-NEXT:      [[C1:%.*]] = stablehlo.multiply [[C]], [[R]] : tensor<f32>
// CHECK-NEXT:      [[LT:%.*]] = stablehlo.compare LT, [[D]], [[C1]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:      stablehlo.return [[LT]] : tensor<i1>
// CHECK-NEXT:    } do {
// CHECK-NEXT:      [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:      [[INV:%.*]] = stablehlo.divide [[ONE]], [[S]] : tensor<f32>
// CHECK-NEXT:      [[E6:%.*]] = stablehlo.constant dense<6.400000e+01> : tensor<f32>
// CHECK-NEXT:      [[R:%.*]] = stablehlo.multiply [[INV]], [[E6]] : tensor<f32>
// CHECK-NEXT:      [[C1:%.*]] = stablehlo.multiply [[C]], [[R]] : tensor<f32>
// CHECK-NEXT:      [[A:%.*]] = stablehlo.add [[D]], [[C1]] : tensor<f32>
// CHECK-NEXT:      stablehlo.return [[A]], [[S]] : tensor<f32>, tensor<f32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return [[W]]#0, [[W]]#1 : tensor<f32>, tensor<f32>
func.func public @main(%arg0: tensor<f32>) -> tensor<f32> {
  %cst = stablehlo.constant dense<100.0> : tensor<f32>
  %0 = stablehlo.while(%iterArg = %arg0) : tensor<f32>
  cond {
    %1 = stablehlo.compare LT, %iterArg, %cst, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.add %iterArg, %cst : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }
  return %0 : tensor<f32>
}

// -----

// case with two branches: each returns a (data, scale) pair, one the runtime
// scale of its argument, the other the static scale of its constant
// materialized inside the branch.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[I:%.*]]: tensor<i32>, [[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]]:2 = "stablehlo.case"([[I]]) ({
// CHECK-NEXT:      [[N:%.*]] = stablehlo.negate [[X]] : tensor<4xf32>
// CHECK-NEXT:      stablehlo.return [[N]], [[XS]] : tensor<4xf32>, tensor<f32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      [[C:%.*]] = stablehlo.constant dense<1.600000e+00> : tensor<4xf32>
// CHECK-NEXT:      [[CS:%.*]] = stablehlo.constant dense<6.250000e-02> : tensor<f32>
// CHECK-NEXT:      stablehlo.return [[C]], [[CS]] : tensor<4xf32>, tensor<f32>
// CHECK-NEXT:    }) : (tensor<i32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    return [[R]]#0, [[R]]#1 : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<i32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.case"(%arg0) ({
    %1 = stablehlo.negate %arg1 : tensor<4xf32>
    stablehlo.return %1 : tensor<4xf32>
  }, {
    %cst = stablehlo.constant dense<0.1> : tensor<4xf32>
    stablehlo.return %cst : tensor<4xf32>
  }) : (tensor<i32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// stablehlo.if: branches capture %x from outside and yield (data, scale) pairs.
// CHECK-LABEL: @main
// CHECK-SAME:    ([[P:%.*]]: tensor<i1>, [[XD:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[IF:%.*]]:2 = "stablehlo.if"([[P]]) ({
// CHECK-NEXT:      [[NEG:%.*]] = stablehlo.negate [[XD]] : tensor<4xf32>
// CHECK-NEXT:      stablehlo.return [[NEG]], [[XS]] : tensor<4xf32>, tensor<f32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      stablehlo.return [[XD]], [[XS]] : tensor<4xf32>, tensor<f32>
// CHECK-NEXT:    }) : (tensor<i1>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    return [[IF]]#0, [[IF]]#1 : tensor<4xf32>, tensor<f32>
func.func public @main(%p: tensor<i1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.if"(%p) ({
    %1 = stablehlo.negate %x : tensor<4xf32>
    stablehlo.return %1 : tensor<4xf32>
  }, {
    stablehlo.return %x : tensor<4xf32>
  }) : (tensor<i1>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
