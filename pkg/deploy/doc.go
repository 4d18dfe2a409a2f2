// Package deploy holds no code: its tests keep the deployment artefacts (template.yaml, the
// Makefile, functions/ and events/) in step with the code they deploy — the route table of
// pkg/api, the table definition of pkg/store/dynamo and the function list of pkg/lambdafn —
// and run cfn-lint on the template.
package deploy
