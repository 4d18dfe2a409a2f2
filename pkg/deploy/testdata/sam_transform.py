"""Runs the SAM transform (aws-sam-translator, what `sam deploy` and cfn-lint use) on a
template for one stack name, and prints the CloudFormation template it becomes as JSON.

usage: sam_transform.py TEMPLATE STACK_NAME

The template's short-form intrinsics (!Ref, !Sub, ...) are read with cfn-lint's decoder. No
AWS call is made: the managed-policy map is empty (the template names none) and the pseudo
parameters are given.
"""
import json
import os
import sys

from cfnlint.decode import decode_str
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator


def main():
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    path, stack = sys.argv[1], sys.argv[2]
    with open(path) as f:
        template, matches = decode_str(f.read())
    if matches:
        sys.exit("cannot read %s: %s" % (path, matches))
    params = {
        "AWS::StackName": stack,
        "AWS::Region": "us-east-1",
        "AWS::AccountId": "123456789012",
        "AWS::Partition": "aws",
        "AWS::URLSuffix": "amazonaws.com",
        "AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/%s/0" % stack,
    }
    template = json.loads(json.dumps(template))
    # What `sam build` and `sam package` do first: each function's code is uploaded and its
    # CodeUri becomes the S3 object.
    for name, res in template.get("Resources", {}).items():
        if res.get("Type") == "AWS::Serverless::Function":
            res["Properties"]["CodeUri"] = "s3://artifacts/%s.zip" % name
    out = Translator({}, Parser()).translate(template, params)
    json.dump(out, sys.stdout, indent=1, sort_keys=True, default=str)


if __name__ == "__main__":
    main()
