package admission

// ShootSpecEqual is shootSpecEqual, for the tests.
var ShootSpecEqual = shootSpecEqual
