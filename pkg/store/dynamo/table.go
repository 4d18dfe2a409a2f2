package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names of the table's keys. They are generic on purpose: every item type puts its own
// meaning into them through the key builder functions in keys.go, so one table and four indexes
// serve every access pattern. template.yaml must declare exactly these (a test compares them).
const (
	AttrPK     = "PK"
	AttrSK     = "SK"
	AttrGSI1PK = "GSI1PK"
	AttrGSI1SK = "GSI1SK"
	AttrGSI2PK = "GSI2PK"
	AttrGSI2SK = "GSI2SK"
	AttrGSI3PK = "GSI3PK"
	AttrGSI3SK = "GSI3SK"
	AttrGSI4PK = "GSI4PK"
	AttrGSI4SK = "GSI4SK"
	AttrGSI5PK = "GSI5PK"
	AttrGSI5SK = "GSI5SK"

	// TTLAttribute holds an epoch-seconds expiry (idempotency records). DynamoDB deletes expired
	// items lazily, so reads still check expiry themselves.
	TTLAttribute = "ttl"
)

// Index names. GSI1..GSI4 project ALL attributes, so a Query on them returns whole items and
// never needs a follow-up read; GSI5 projects the keys only.
//
//   - GSI1: team-wide lists: emails by team and day, API keys by team, suppressions by team,
//     campaigns by team (newest first), and all teams (admin).
//   - GSI2: emails by team, domain and day; suppressions by team and reason.
//   - GSI3: emails by provider message id (sparse: only sent emails).
//   - GSI4: webhook calls due (sparse); and the work index of emails written before GSI5.
//   - GSI5: the work index (sparse: the attributes are removed when the email leaves those
//     states): emails waiting for the sender, QUEUED or SENDING, oldest first; SCHEDULED
//     emails by their scheduledAt; a paused campaign's held emails. Keys only: what reads it
//     needs is the email id (in PK) and the sort key, and an email's status writes that keep
//     its work key (QUEUED to SENDING, a retry) then write nothing to the index.
const (
	IndexGSI1 = "GSI1"
	IndexGSI2 = "GSI2"
	IndexGSI3 = "GSI3"
	IndexGSI4 = "GSI4"
	IndexGSI5 = "GSI5"
)

// indexKeys lists each index with its partition and sort key attributes, in declaration order.
func indexKeys() [][3]string {
	return [][3]string{
		{IndexGSI1, AttrGSI1PK, AttrGSI1SK},
		{IndexGSI2, AttrGSI2PK, AttrGSI2SK},
		{IndexGSI3, AttrGSI3PK, AttrGSI3SK},
		{IndexGSI4, AttrGSI4PK, AttrGSI4SK},
		{IndexGSI5, AttrGSI5PK, AttrGSI5SK},
	}
}

// KeysOnly lists the indexes that project the keys only.
var KeysOnly = []string{IndexGSI5}

// TableInput is the declarative definition of the table: string keys PK/SK, five global
// secondary indexes GSI1..GSI5 (string keys <name>PK/<name>SK; projection ALL, KEYS_ONLY for
// KeysOnly), on-demand
// billing and a stream with new and old images (the sender reacts to QUEUED emails through it).
// TTL cannot be part of CreateTable; EnsureTable enables it on TTLAttribute.
func TableInput(name string) *dynamodb.CreateTableInput {
	attrs := []types.AttributeDefinition{
		{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String(AttrSK), AttributeType: types.ScalarAttributeTypeS},
	}
	var gsis []types.GlobalSecondaryIndex
	for _, ix := range indexKeys() {
		attrs = append(attrs,
			types.AttributeDefinition{AttributeName: aws.String(ix[1]), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String(ix[2]), AttributeType: types.ScalarAttributeTypeS},
		)
		gsis = append(gsis, types.GlobalSecondaryIndex{
			IndexName: aws.String(ix[0]),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(ix[1]), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(ix[2]), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: projection(ix[0])},
		})
	}
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: attrs,
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrSK), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: gsis,
		BillingMode:            types.BillingModePayPerRequest,
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewTypeNewAndOldImages, // old images: webhook events of deletes and transitions
		},
	}
}

// addIndexes creates the indexes of TableInput that table lacks, waiting for each.
func addIndexes(ctx context.Context, client *dynamodb.Client, name string, table *types.TableDescription) error {
	have := map[string]bool{}
	for _, g := range table.GlobalSecondaryIndexes {
		have[aws.ToString(g.IndexName)] = true
	}
	want := TableInput(name)
	for _, g := range want.GlobalSecondaryIndexes {
		if have[aws.ToString(g.IndexName)] {
			continue
		}
		var attrs []types.AttributeDefinition
		for _, k := range g.KeySchema {
			attrs = append(attrs, types.AttributeDefinition{AttributeName: k.AttributeName, AttributeType: types.ScalarAttributeTypeS})
		}
		_, err := client.UpdateTable(ctx, &dynamodb.UpdateTableInput{
			TableName: aws.String(name), AttributeDefinitions: attrs,
			GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
				IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection}}},
		})
		if err != nil {
			return fmt.Errorf("add index %s to %s: %w", aws.ToString(g.IndexName), name, err)
		}
		for {
			d, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
			if err != nil {
				return fmt.Errorf("describe table %s: %w", name, err)
			}
			active := false
			for _, x := range d.Table.GlobalSecondaryIndexes {
				if aws.ToString(x.IndexName) == aws.ToString(g.IndexName) && x.IndexStatus == types.IndexStatusActive {
					active = true
				}
			}
			if active {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

func projection(index string) types.ProjectionType {
	if slices.Contains(KeysOnly, index) {
		return types.ProjectionTypeKeysOnly
	}
	return types.ProjectionTypeAll
}

// EnsureTable creates the table when it does not exist, waits until it is ACTIVE and enables
// TTL on TTLAttribute. An existing table is left as it is apart from TTL, which is enabled if
// it is not already (so a table created by hand still expires idempotency records), and the
// indexes a later version added, which are created (one at a time, as DynamoDB requires).
func EnsureTable(ctx context.Context, client *dynamodb.Client, name string) error {
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var notFound *types.ResourceNotFoundException
	if err == nil {
		if err := addIndexes(ctx, client, name, desc.Table); err != nil {
			return err
		}
	}
	switch {
	case errors.As(err, &notFound):
		_, err = client.CreateTable(ctx, TableInput(name))
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("create table %s: %w", name, err)
		}
	case err != nil:
		return fmt.Errorf("describe table %s: %w", name, err)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = 2 * time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 5*time.Minute); err != nil {
		return fmt.Errorf("wait for table %s: %w", name, err)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("describe ttl of %s: %w", name, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("enable ttl on %s: %w", name, err)
	}
	return nil
}
