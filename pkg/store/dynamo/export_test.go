package dynamo

// ItemSize exposes the item size estimate to the external tests (write capacity metering).
var ItemSize = itemSize
