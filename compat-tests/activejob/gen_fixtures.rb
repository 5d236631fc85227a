# Writes fixtures/activejob/rails-<version>.json for the Rust decoder tests
# (tests/suite/activejob_decode.rs): for every case of AJ.cases, the exact wrapper payload the
# Resque adapter pushes (`job.serialize`, MultiJson json_gem adapter), plus what resq must
# make of it, computed from the Ruby values (AJ.plain, AJ.unknown), and the metadata.
#
#   ruby compat-tests/activejob/gen_fixtures.rb                      # Debian's Rails 6.1
#   RAILS_SRC=/tmp/rails-v7.2.2 ruby compat-tests/activejob/gen_fixtures.rb
#
# where /tmp/rails-v7.2.2 holds `git archive v7.2.2 activesupport/lib activejob/lib` of
# rails/rails. Needs no Redis.

require 'json'
require 'time'
require_relative 'lib/aj'
require_relative 'lib/shapes'

MultiJson.use(:json_gem)
root = File.expand_path('../..', __dir__)
src = ENV['RAILS_SRC'].to_s
source = if src.empty?
           pkg = `dpkg-query -W -f='${Version}' ruby-activejob 2>/dev/null`.strip
           "Debian package ruby-activejob #{pkg} (/usr/share/rubygems-integration)"
         else
           "rails/rails source tree #{File.basename(src)} (activesupport/lib + activejob/lib), run in place"
         end

cases = AJ.cases.map do |name, (klass, args, kw)|
  job = AJ.job(klass, args, kw)
  all = kw ? args + [kw] : args
  { 'name' => name, 'job_class' => klass.name, 'queue' => job.queue_name,
    'payload' => AJ.wrapper_bytes(job), 'expected_args' => AJ.plain(all),
    'expected_unknown' => AJ.unknown(all), 'keywords' => !kw.nil? }
end

# A job as ActiveJob's retry_on re-enqueues it: metadata other than the defaults.
job = EchoJob.new('again')
job.executions = 2
job.exception_executions = { '[RuntimeError]' => 2 }
job.provider_job_id = 'provider-7'
job.priority = 3
job.scheduled_at = Time.utc(2026, 11, 21, 19, 16, 33, 500_000) if job.respond_to?(:scheduled_at=)
I18n.available_locales = %i[en de]
data = I18n.with_locale(:de) { job.serialize }
cases << { 'name' => 'retried_metadata', 'job_class' => 'EchoJob', 'queue' => job.queue_name,
           'payload' => AJ.encode(class: AJ::WRAPPER, args: [data]), 'expected_args' => ['again'],
           'expected_unknown' => [], 'keywords' => false }

out = {
  'provenance' => {
    'rails' => AJ::VERSION, 'source' => source, 'ruby' => RUBY_DESCRIPTION,
    'globalid' => Gem.loaded_specs['globalid']&.version.to_s,
    'multi_json_adapter' => MultiJson.adapter.to_s,
    'big_decimal' => if ActiveJob.version >= Gem::Version.new('7.2') then 'BigDecimalSerializer (always)'
                     elsif ActiveJob.respond_to?(:use_big_decimal_serializer) then "use_big_decimal_serializer = #{ActiveJob.use_big_decimal_serializer}"
                     else 'plain string (no serializer before 7.1)'
                     end,
    'command' => "#{src.empty? ? '' : "RAILS_SRC=<#{File.basename(src)}> "}ruby compat-tests/activejob/gen_fixtures.rb",
    'generated_at' => Time.now.utc.iso8601,
    'note' => 'payload = bytes Rails\' Resque adapter pushes; expected_* = what resq must decode, computed from the Ruby values'
  },
  'cases' => cases
}
dir = File.join(root, 'fixtures', 'activejob')
Dir.mkdir(dir) unless Dir.exist?(dir)
path = File.join(dir, "rails-#{AJ::VERSION.split('.').first(2).join('.')}.json")
File.write(path, "#{JSON.pretty_generate(out)}\n")
puts "wrote #{path} (#{cases.size} cases)"
