package dynamo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// key is the primary key of one item.
type key struct{ PK, SK string }

// Key builders: one per item type, the only place where key strings are spelled. Integer ids
// are zero-padded so that the sort key order is the numeric order.

func teamKey(id int64) key { return key{fmt.Sprintf("TEAM#%d", id), "TEAM"} }

// teamListKey puts every team in one GSI1 partition; it is read by the admin only.
func teamListKey(id int64) key { return key{"TEAMS", fmt.Sprintf("TEAM#%020d", id)} }

func sequenceKey(name string) key { return key{"SEQ#" + name, "SEQ"} }

// apiKeyKey is not under the team: authentication knows the key id only.
func apiKeyKey(id string) key { return key{"APIKEY#" + id, "APIKEY"} }

func apiKeyTeamIndexKey(teamID int64, id string) key {
	return key{fmt.Sprintf("TEAM#%d#APIKEYS", teamID), "APIKEY#" + id}
}

func domainKey(teamID, id int64) key {
	return key{fmt.Sprintf("TEAM#%d", teamID), fmt.Sprintf("DOMAIN#%020d", id)}
}

// domainPrefix selects every domain of a team (DOMAINNAME# guards do not match: the '#').
const domainPrefix = "DOMAIN#"

// domainNameKey is the uniqueness guard of a domain name across all teams (a provider
// identity belongs to the whole account), written in the same transaction as the domain.
func domainNameKey(name string) key {
	return key{"DOMAINNAME#" + strings.ToLower(name), "DOMAINNAME"}
}

func templateKey(teamID int64, id string) key {
	return key{fmt.Sprintf("TEAM#%d", teamID), "TEMPLATE#" + id}
}

const templatePrefix = "TEMPLATE#"

// emailKey, eventKey and contentKey share the email's partition, so one Query reads the
// detail. Their sort keys order as CONTENT# < EMAIL < EVENT#.
func emailKey(id string) key { return key{"EMAIL#" + id, "EMAIL"} }

// listKey is the email's list entry: the item that carries its list index keys (GSI1, GSI2),
// written once, so that the email item's many rewrites do not write the list indexes.
func listKey(id string) key { return key{"EMAIL#" + id, "LIST"} }

// eventKey is deterministic per (email, event id) so that a second event with the same id is a
// failed attribute_not_exists condition; events are sorted by time in code.
func eventKey(emailID, eventID string) key { return key{"EMAIL#" + emailID, "EVENT#" + eventID} }

const (
	eventPrefix   = "EVENT#"
	contentPrefix = "CONTENT#"
)

// contentKey names chunk n of the content whose gzip'd bytes hash to ref. The ref keeps the
// chunks of a retried create (whose email turns out to exist) from overwriting the original.
func contentKey(emailID, ref string, n int) key {
	return key{"EMAIL#" + emailID, fmt.Sprintf("%s%s#%05d", contentPrefix, ref, n)}
}

// Time formats. sortTime has a fixed width so that string order is time order.
const (
	sortTime = "2006-01-02T15:04:05.000000000Z"
	dayFmt   = "2006-01-02"
)

func day(t time.Time) string { return t.UTC().Format(dayFmt) }

// emailSort is the sort key of an email in the list indexes: newest first is descending order.
func emailSort(createdAt time.Time, id string) string {
	return createdAt.UTC().Format(sortTime) + "#" + id
}

// emailDayIndexKey is the GSI1 partition of a team's emails created on one UTC day, in one of
// WorkShards shards (by the email id, workShard): every send writes its team's list, and one
// partition takes about 1,000 writes/s, so a day is split as the work index is and a list
// merges the shards. legacyShard is the unsharded partition of emails written before.
func emailDayIndexKey(teamID int64, day string, shard int) string {
	if shard == legacyShard {
		return fmt.Sprintf("TEAM#%d#DAY#%s", teamID, day)
	}
	return fmt.Sprintf("TEAM#%d#DAY#%s#%02d", teamID, day, shard)
}

// emailDomainDayIndexKey is the GSI2 partition of a team's emails of one domain on one day,
// sharded likewise.
func emailDomainDayIndexKey(teamID, domainID int64, day string, shard int) string {
	if shard == legacyShard {
		return fmt.Sprintf("TEAM#%d#DOM#%d#DAY#%s", teamID, domainID, day)
	}
	return fmt.Sprintf("TEAM#%d#DOM#%d#DAY#%s#%02d", teamID, domainID, day, shard)
}

// listShards is every shard of a day's list partitions, the former unsharded one first.
func listShards() []int {
	out := []int{legacyShard}
	for s := range WorkShards {
		out = append(out, s)
	}
	return out
}

// dayCounterKey counts a team's emails per day in one of WorkShards shards (by the email id):
// attribute "n" for the team, "d<domain id>" for each domain, so an email's create adds to one
// item. One Query over a shard's DAY# range sums any span of days; a count reads every shard.
func dayCounterKey(teamID int64, day string, shard int) key {
	return key{fmt.Sprintf("TEAM#%d#COUNT#%02d", teamID, shard), "DAY#" + day}
}

// scheduledCounterKey counts a team's SCHEDULED emails (attribute "n") in one of WorkShards
// shards (by the email id), next to the day counters; ScheduledCount sums the shards.
func scheduledCounterKey(teamID int64, shard int) key {
	return key{fmt.Sprintf("TEAM#%d#COUNT#%02d", teamID, shard), "SCHEDULED"}
}

// statsKey holds a team's analytics counts of a day in one of WorkShards shards (by the email
// id), next to its day counters: attribute "<kind>" for the team, "<kind>_<domain id>" for each
// domain. DailyStats reads a range of days from each shard with one Query.
func statsKey(teamID int64, day string, shard int) key {
	return key{fmt.Sprintf("TEAM#%d#COUNT#%02d", teamID, shard), statsPrefix + day}
}

const statsPrefix = "STATS#"

// statsAttr is a kind's attribute in a stats item: the team's, or a domain's.
func statsAttr(kind string, domainID int64) string {
	if domainID == 0 {
		return kind
	}
	return fmt.Sprintf("%s_%d", kind, domainID)
}

// domainCountAttr is a domain's attribute in the day counter items.
func domainCountAttr(domainID int64) string { return fmt.Sprintf("d%d", domainID) }

// teamCounterKey and domainCounterKey are the unsharded day counters written before: read,
// and no longer written.
func teamCounterKey(teamID int64, day string) key {
	return key{fmt.Sprintf("TEAM#%d#COUNT", teamID), "DAY#" + day}
}

func domainCounterKey(teamID, domainID int64, day string) key {
	return key{fmt.Sprintf("TEAM#%d#DOM#%d#COUNT", teamID, domainID), "DAY#" + day}
}

const counterPrefix = "DAY#"

// messageIDIndexKey is the GSI3 partition of the email the provider knows by messageID.
func messageIDIndexKey(messageID string) string { return "MSG#" + messageID }

// WorkShards is how many GSI4 partitions the pending and the scheduled emails are spread over,
// by a hash of the email id: every send writes one of them (twice: queued, then done), and one
// partition takes about 1,000 writes/s, so 16 take the 10,000 emails/s the design aims at.
// The reconciler reads every shard and merges them oldest first.
const WorkShards = 16

func workShard(emailID string) int {
	h := fnv.New32a()
	h.Write([]byte(emailID))
	return int(h.Sum32() % WorkShards)
}

// pendingIndexKey is the GSI4 partition (one of WorkShards) holding the email while it is
// QUEUED or SENDING, sorted oldest first by emailSort. It is sparse: a finished email has no
// GSI4 attributes.
// Shard legacyShard is the single partition of tables written before the sharding, still read
// so that no email indexed there is lost.
func pendingIndexKey(shard int) string {
	if shard == legacyShard {
		return "PENDING"
	}
	return fmt.Sprintf("PENDING#%02d", shard)
}

const legacyShard = -1

// scheduledIndexKey is the GSI4 partition (one of WorkShards) holding SCHEDULED emails sorted
// by their scheduledAt (emailSort), so the reconciler finds one whose schedule never fired.
func scheduledIndexKey(shard int) string {
	if shard == legacyShard {
		return "SCHEDULED"
	}
	return fmt.Sprintf("SCHEDULED#%02d", shard)
}

// heldIndexKey is the GSI4 partition of a campaign's held emails (QUEUED while the campaign is
// paused), released when it resumes or is deleted.
func heldIndexKey(teamID int64, campaignID string) string {
	return fmt.Sprintf("TEAM#%d#CAMPAIGN#%s#HELD", teamID, campaignID)
}

// idempotencyKey hashes the caller's key (up to 256 chars of anything) into a fixed-size one.
func idempotencyKey(teamID int64, k string) key {
	sum := sha256.Sum256([]byte(k))
	return key{fmt.Sprintf("TEAM#%d#IDEM#%s", teamID, hex.EncodeToString(sum[:])), "IDEM"}
}

// suppressionKey gives each suppressed address its own partition: GetSuppressions is a batch of
// GetItems and a large list does not crowd one partition.
func suppressionKey(teamID int64, email string) key {
	return key{fmt.Sprintf("TEAM#%d#SUPP#%s", teamID, strings.ToLower(email)), "SUPP"}
}

// suppressionIndexKey (GSI1) lists a team's suppressions; suppressionReasonIndexKey (GSI2) the
// ones of one reason. Both sort by emailSort(createdAt, address).
func suppressionIndexKey(teamID int64) string { return fmt.Sprintf("TEAM#%d#SUPPS", teamID) }

func suppressionReasonIndexKey(teamID int64, reason string) string {
	return fmt.Sprintf("TEAM#%d#SUPPS#%s", teamID, reason)
}

// Contact books, contacts and campaigns.
//
//   - book:          PK=TEAM#<t>                          SK=BOOK#<bookId>
//     ContactCount is an attribute of the book item, raised and lowered (ADD) in the same
//     transaction that creates or deletes a contact; UpdateContactBook SETs every other attribute.
//   - contact:       PK=TEAM#<t>#BOOK#<bookId>            SK=CONTACT#<lower-cased email>
//     the book's partition holds its contacts only, so one Query walks a book in email order
//     (ContactsAfter: SK > CONTACT#<cursor>) and the key itself makes an email unique in a book.
//   - contact id:    PK=TEAM#<t>#BOOK#<bookId>#CONTACTID#<id>  SK=CONTACTID
//     attribute Email: a strongly consistent pointer from a contact id to its contact key, one
//     partition per contact (GetContact, UpdateContact and DeleteContacts go by id). Written and
//     deleted in the same transactions as the contact.
//   - deleted book:  PK=DELETEDBOOKS                      SK=TEAM#<t, 20 digits>#BOOK#<bookId>
//     a marker written in the transaction that deletes the book, deleted once its contacts are
//     gone; DeletedContactBooks is one Query of this partition.
//   - campaign:      PK=TEAM#<t>                          SK=CAMPAIGN#<id>
//     GSI1PK=TEAM#<t>#CAMPAIGNS GSI1SK=<createdAt>#<id>: the team's campaigns, newest first.
//   - counters:      PK=TEAM#<t>#CAMPAIGN#<id>#<shard>    SK=COUNTERS
//     one number attribute per counter kind (store.Count*), only ever changed by ADD in the
//     transactions that write the campaign's emails, in the shard of the email's id (a read
//     sums the shards, and the unsharded PK=TEAM#<t>#CAMPAIGN#<id> written before). Kept apart from the campaign item so that
//     UpdateCampaign (a Version-conditioned Put) never clobbers them and so that an email event
//     arriving after DeleteCampaign cannot resurrect a campaign item (at worst it leaves a stray
//     counters item behind).

func bookKey(teamID int64, id string) key {
	return key{fmt.Sprintf("TEAM#%d", teamID), bookPrefix + id}
}

const bookPrefix = "BOOK#"

func contactPartition(teamID int64, bookID string) string {
	return fmt.Sprintf("TEAM#%d#BOOK#%s", teamID, bookID)
}

func contactKey(teamID int64, bookID, email string) key {
	return key{contactPartition(teamID, bookID), contactPrefix + strings.ToLower(email)}
}

const contactPrefix = "CONTACT#"

func contactIDKey(teamID int64, bookID, id string) key {
	return key{contactPartition(teamID, bookID) + "#CONTACTID#" + id, "CONTACTID"}
}

// deletedBooksPartition holds one marker per deleted book whose contacts remain.
const deletedBooksPartition = "DELETEDBOOKS"

func deletedBookKey(teamID int64, bookID string) key {
	return key{deletedBooksPartition, fmt.Sprintf("TEAM#%020d#BOOK#%s", teamID, bookID)}
}

func campaignKey(teamID int64, id string) key {
	return key{fmt.Sprintf("TEAM#%d", teamID), campaignPrefix + id}
}

// campaignIndexKey is the GSI1 partition of a team's campaigns (sorted by emailSort).
func campaignIndexKey(teamID int64) string { return fmt.Sprintf("TEAM#%d#CAMPAIGNS", teamID) }

// CampaignCounterShards is how many counters items a campaign's counts are spread over (by
// the email id). A recipient adds to them about four times (total, sent, delivered, opened),
// each 2 WRU inside the email's transaction, and one item takes about 1,000 WRU/s: 8 items
// take a campaign to about 1,000 recipients/s. A read of the counters sums them (and the
// unsharded item written before); a send reads the campaign without them (GetCampaignState).
const CampaignCounterShards = 8

func campaignCountersKey(teamID int64, id string, shard int) key {
	if shard == legacyShard {
		return key{fmt.Sprintf("TEAM#%d#CAMPAIGN#%s", teamID, id), "COUNTERS"}
	}
	return key{fmt.Sprintf("TEAM#%d#CAMPAIGN#%s#%02d", teamID, id, shard), "COUNTERS"}
}

func campaignCounterShard(emailID string) int { return workShard(emailID) % CampaignCounterShards }

// campaignCounterKeys is every counters item of a campaign.
func campaignCounterKeys(teamID int64, id string) []key {
	out := []key{campaignCountersKey(teamID, id, legacyShard)}
	for s := range CampaignCounterShards {
		out = append(out, campaignCountersKey(teamID, id, s))
	}
	return out
}
