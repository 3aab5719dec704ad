// The partition the Java producer (Kafka Connect's, so Debezium's) gives each key.
//
// Usage: java -cp <kafka-clients jar> KeyPartitions.java <partitions>
// Reads one key per line of stdin, in hex; prints one partition per line, in order.
// It asks the Java client's own BuiltInPartitioner.partitionForKey: the function
// KafkaProducer.partition calls for a keyed record when no partitioner.class is set
// (tests/integration/test_partitioning_kafka.py compares pgcdc's placement with it).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;

public class KeyPartitions {
    public static void main(String[] args) throws Exception {
        int partitions = Integer.parseInt(args[0]);
        HexFormat hex = HexFormat.of();
        BufferedReader in =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            byte[] key = hex.parseHex(line.trim());
            out.append(BuiltInPartitioner.partitionForKey(key, partitions)).append('\n');
        }
        System.out.print(out);
    }
}
